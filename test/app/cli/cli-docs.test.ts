/**
 * docs/cli.md is the generator's output from the command tables. `npm run docs:cli` (this test with
 * UPDATE_CLI_DOCS=1) rewrites it; otherwise the test fails when it differs, so CI checks it.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderCliDocs } from '../../../src/app/cli/cli-docs.js';
import { COMMANDS } from '../../../src/app/cli/commands.js';

const DOCS = resolve(import.meta.dirname, '../../../docs/cli.md');

describe('docs/cli.md', () => {
  it('is exactly what the command tables generate (regenerate: npm run docs:cli)', async () => {
    const generated = await renderCliDocs();
    if (process.env.UPDATE_CLI_DOCS === '1') writeFileSync(DOCS, generated);
    expect(readFileSync(DOCS, 'utf8')).toBe(generated);
  });

  it('has a section per command of the command table', async () => {
    const generated = await renderCliDocs();
    for (const c of COMMANDS) expect(generated).toContain(`## confboot ${c.name}\n`);
  });
});
