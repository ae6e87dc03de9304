/** Every registered command (and every attestation verb) answers --help with exit code 0. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { COMMANDS } from '../../../src/app/cli/commands.js';

function captureStdout(): { text: () => string } {
  let out = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    out += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
    return true;
  });
  return { text: () => out };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe('confboot --help', () => {
  it('registers commands', () => {
    expect(COMMANDS.map((c) => c.name)).toContain('attestation');
  });

  it.each(COMMANDS.map((c) => [c.name, c] as const))(
    '%s --help prints usage and exits 0',
    async (name, command) => {
      const out = captureStdout();
      const code = await (await command.load()).run(['--help']);
      expect(code).toBe(0);
      expect(out.text()).toContain(`confboot ${name}`);
    },
  );

  it.each(['verify', 'verify-snp', 'verify-tdx', 'verify-nitrotpm'])(
    'attestation %s --help prints usage and exits 0',
    async (verb) => {
      const out = captureStdout();
      const attestation = COMMANDS.find((c) => c.name === 'attestation');
      const code = await (await attestation!.load()).run([verb, '--help']);
      expect(code).toBe(0);
      expect(out.text()).toContain(`attestation ${verb}`);
    },
  );
});
