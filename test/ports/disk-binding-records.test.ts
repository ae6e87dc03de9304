import { describe, expect, it } from 'vitest';
import { DiskBindingRecords } from '../../src/ports/disk-binding-records.js';

describe('DiskBindingRecords port', () => {
  it('has a global DI token of its own name', () => {
    expect(DiskBindingRecords).toBe(Symbol.for('confboot.DiskBindingRecords'));
  });
});
