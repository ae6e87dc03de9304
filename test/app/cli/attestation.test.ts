/**
 * `confboot attestation`: its usage lists the four verify verbs with the exit codes, each verb's
 * module is loaded only when it runs (here its own --help, exit 0), and the option specs of every
 * verb are gathered for the CLI documentation.
 */
import { describe, expect, it } from 'vitest';
import { loadCommandSpecs, run } from '../../../src/app/cli/attestation.js';
import { captureStdio } from '../../support/stdio.js';

describe('confboot attestation', () => {
  const stdio = captureStdio();

  it('lists the verify verbs and the exit codes', async () => {
    expect(await run(['--help'])).toBe(0);
    const out = stdio.stdout();
    for (const verb of ['verify ', 'verify-snp ', 'verify-tdx ', 'verify-nitrotpm '])
      expect(out).toContain(`  ${verb}`);
    expect(out).toContain('Exit codes: 0 accepted, 1 rejected, 2 usage or input error.');
  });

  it.each(['verify', 'verify-snp', 'verify-tdx', 'verify-nitrotpm'])('runs %s (its --help)', async (verb) => {
    expect(await run([verb, '--help'])).toBe(0);
    expect(stdio.stdout()).toContain(verb);
  });

  it('refuses an unknown verb with exit 2', async () => {
    expect(await run(['verify-sgx'])).toBe(2);
    expect(stdio.stderr()).toContain('confboot attestation: unknown verb "verify-sgx"');
  });

  it('gathers the option specs of every verb', async () => {
    const names = (await loadCommandSpecs()).map((s) => s.name);
    expect(names.length).toBeGreaterThanOrEqual(4);
    for (const verb of ['verify', 'verify-snp', 'verify-tdx', 'verify-nitrotpm'])
      expect(names.some((n) => n.includes(verb))).toBe(true);
  });
});
