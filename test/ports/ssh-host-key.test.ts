import { describe, expect, it } from 'vitest';
import { SshHostKey } from '../../src/ports/ssh-host-key.js';

describe('SshHostKey port', () => {
  it('has a global DI token of its own name', () => {
    expect(SshHostKey).toBe(Symbol.for('confboot.SshHostKey'));
  });
});
