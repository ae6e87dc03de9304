/**
 * The cases every cloud entrypoint's test runs: its `main` is the bootstrapper program with the
 * entrypoint's cloud fixed, so `--help` names that cloud as the only one it takes, `--cloud` with it
 * is accepted as far as the option check goes, and another cloud is a usage error (exit 2).
 */
import { describe, expect, it } from 'vitest';
import { captureStdio } from '../../support/stdio.js';

export function describeEntrypoint(
  cloud: string,
  other: string,
  main: (argv: string[]) => Promise<number>,
): void {
  describe(`the ${cloud} entrypoint`, () => {
    const stdio = captureStdio();

    it(`answers --help naming ${cloud} as the only cloud it takes`, async () => {
      expect(await main(['--help'])).toBe(0);
      expect(stdio.stdout()).toContain(`bootstrapper (${cloud} entrypoint)`);
      expect(stdio.stdout()).toContain(`(this entrypoint's: ${cloud}, the only one it takes)`);
    });

    it(`refuses --cloud ${other} as a usage error`, async () => {
      expect(await main(['--cloud', other, '--disk', '/dev/null', '--check-wiring'])).toBe(2);
      expect(stdio.stderr()).toContain(`--cloud: this entrypoint is for ${cloud}, got "${other}"`);
    });
  });
}
