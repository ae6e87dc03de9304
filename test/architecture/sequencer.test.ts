/**
 * The long-running files the test sequencer starts first (test/support/sequencer.ts) exist, so a
 * rename cannot silently put one back in the middle of the run.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LONG_RUNNING_TEST_FILES } from '../support/sequencer.js';

describe('test sequencer', () => {
  it.each(LONG_RUNNING_TEST_FILES)('%s exists', (file) => {
    expect(existsSync(join(import.meta.dirname, '..', '..', file))).toBe(true);
  });
});
