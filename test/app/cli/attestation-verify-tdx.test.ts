/**
 * `confboot attestation verify-tdx` run() on the go-tdx-guest quotes: v4 with and without
 * collateral at 2023-07-01, v5 and CCEL with the chain only, expiry, and usage errors (exit 2).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { run } from '../../../src/app/cli/attestation-verify-tdx.js';
import { describeVectors, VECTORS, vec } from '../../adapters/attestation/snp/vectors.js';
import { createFakeIntelPki, signTdxQuote } from '../../adapters/attestation/tdx/fake-intel-pki.js';
import { startFakePcs } from '../../adapters/attestation/tdx/fake-pcs.js';
import { captureStdio } from '../../support/stdio.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-tdx-cli-');
const v = (p: string) => join(VECTORS, p);
const { stdout, stderr, clearStdout } = captureStdio();

describeVectors('confboot attestation verify-tdx', () => {
  const root = ['--root', v('go-tdx-guest/trust/trusted_root.pem')];
  const v4 = v('go-tdx-guest/testdata/tdx_prod_quote_SPR_E4.dat');

  it('accepts the v4 quote with the chain only at 2023-07-01', async () => {
    expect(await run(['--quote', v4, ...root, '--at', '2023-07-01T00:00:00Z'])).toBe(0);
    expect(stdout()).toContain('PASS  quote-signature');
    expect(stdout()).toContain('PASS  qe-report-signature');
    expect(stdout().trim().endsWith('ACCEPTED')).toBe(true);
  });

  it('with collateral at 2023-07-01 and --tcb-level enforce: every collateral check passes except the TCB level (README caveat), so exit 1', async () => {
    expect(
      await run([
        '--quote',
        v4,
        ...root,
        '--tcb-level',
        'enforce',
        '--at',
        '2023-07-01T00:00:00Z',
        '--collateral',
        v('go-tdx-guest/testdata'),
      ]),
    ).toBe(1);
    const text = stdout();
    for (const name of [
      'tcb-info-signature',
      'tcb-info-validity',
      'tcb-info-fmspc',
      'qe-identity-signature',
      'qe-identity',
      'root-crl',
      'pck-crl',
    ])
      expect(text).toContain(`PASS  ${name}`);
    expect(text).toContain('FAIL  tcb-level: no TCB level matches');
  });

  it('with collateral from Intel PCS (a FAKE PCS serving the same real collateral): the same checks as from the directory', async () => {
    const at = ['--at', '2023-07-01T00:00:00Z', '--tcb-level', 'report', '--json'];
    expect(await run(['--quote', v4, ...root, ...at, '--collateral', v('go-tdx-guest/testdata')])).toBe(0);
    const fromDir = (JSON.parse(stdout()) as { result: { checks: { name: string; ok: boolean }[] } }).result;
    clearStdout();
    const pcs = await startFakePcs();
    try {
      const argv = ['--collateral', `pcs:${pcs.base}`, '--root-crl-url', pcs.rootCrlUrl];
      expect(await run(['--quote', v4, ...root, ...at, ...argv])).toBe(0);
      const fromPcs = (JSON.parse(stdout()) as { result: { checks: { name: string; ok: boolean }[] } })
        .result;
      expect(fromPcs.checks.map((c) => [c.name, c.ok])).toEqual(fromDir.checks.map((c) => [c.name, c.ok]));
      expect(fromPcs.checks.map((c) => c.name)).toContain('pck-crl');
      expect(pcs.total()).toBe(4);

      pcs.routes = {};
      expect(await run(['--quote', v4, ...root, ...at, ...argv])).toBe(2);
      expect(stderr()).toMatch(/--collateral: fetching .*: GET http:\/\/127\.0\.0\.1:\d+\/.*HTTP 404/);
    } finally {
      await pcs.close();
    }
    expect(await run(['--quote', v4, ...root, '--root-crl-url', 'http://mirror/root.crl'])).toBe(2);
    expect(stderr()).toContain('--root-crl-url needs --collateral pcs[:URL]');
  });

  it("the issue's form, no --root: v4 with collateral at 2023-07-01 (TCB level reported), v5 and CCEL with the chain only; the chain's root is trusted by Intel's built-in key pin", async () => {
    const collateral = ['--collateral', v('go-tdx-guest/testdata')];
    expect(await run(['--quote', v4, ...collateral, '--at', '2023-07-01T00:00:00Z'])).toBe(0);
    const text = stdout();
    expect(text).toContain(
      "PASS  root-pin: the PCK chain's root carries Intel's SGX Root CA key (built-in pin)",
    );
    for (const name of ['pck-chain', 'tcb-info-signature', 'qe-identity', 'root-crl', 'pck-crl'])
      expect(text).toContain(`PASS  ${name}`);
    expect(text).toMatch(/PASS {2}tcb-level: .*no TCB level matches/);
    expect(text.trim().endsWith('ACCEPTED')).toBe(true);
    clearStdout();
    const v5 = v('go-tdx-guest/testdata/quote_v5_sample.dat');
    expect(await run(['--quote', v5, '--at', '2026-02-03T00:00:00Z'])).toBe(0);
    clearStdout();
    expect(await run(['--quote', v('go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat')])).toBe(0);
    clearStdout();

    // A quote under another root (a FAKE Intel PKI named like Intel's) is refused for root-pin.
    const fake = await createFakeIntelPki();
    const forged = join(tmp(), 'forged.dat');
    writeFileSync(forged, signTdxQuote(fake, { reportData: new Uint8Array(64) }));
    expect(await run(['--quote', forged])).toBe(1);
    expect(stdout()).toMatch(
      /FAIL {2}root-pin: the PCK chain's root has key SHA-256 [0-9a-f]{64}, not Intel's SGX Root CA key/,
    );
    clearStdout();
    expect(await run(['--quote', forged, '--root', join(tmp(), 'missing.pem')])).toBe(2);
  });

  it('accepts v5 at 2026-02-03 and the base64-encoded CCEL quote now, as JSON with MRTD and RTMRs', async () => {
    expect(
      await run([
        '--quote',
        v('go-tdx-guest/testdata/quote_v5_sample.dat'),
        ...root,
        '--at',
        '2026-02-03T00:00:00Z',
      ]),
    ).toBe(0);
    clearStdout();
    const file = join(tmp(), 'quote.b64');
    writeFileSync(file, vec('go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat').toString('base64'));
    expect(await run(['--quote', file, ...root, '--json', '--report-data', '00'])).toBe(0);
    const json = (
      JSON.parse(stdout()) as {
        result: {
          accepted: boolean;
          fmspc: string;
          quote: { measurements: Record<string, string> };
        };
      }
    ).result;
    expect(json.accepted).toBe(true);
    expect(json.fmspc).toBe('00806f050000');
    expect(json.quote.measurements['1']?.startsWith('3fa2f61f')).toBe(true);
  });

  it('rejects the v4 quote at 2053-07-01 (PCK leaf expired)', async () => {
    expect(await run(['--quote', v4, ...root, '--at', '2053-07-01T00:00:00Z'])).toBe(1);
    expect(stdout()).toContain('FAIL  certificate-validity');
  });

  it.each([
    ['missing --quote', ['--root', 'r'], 'missing required option --quote'],
    ['unreadable quote', ['--quote', '/nonexistent/q', '--root', 'r'], 'reading quote'],
    ['bad --at', ['--quote', 'q', '--root', 'r', '--at', '2023-13-45'], 'not a valid time'],
  ])('exits 2 on %s', async (_name, argv, message) => {
    expect(await run(argv)).toBe(2);
    expect(stderr()).toContain(message);
  });

  it('exits 2 on a file that is not a quote, and on an empty collateral directory', async () => {
    const dir = tmp();
    writeFileSync(join(dir, 'junk'), Buffer.from([1, 2, 3]));
    expect(await run(['--quote', join(dir, 'junk'), ...root])).toBe(2);
    expect(stderr()).toContain('TDX quote is truncated');
    expect(await run(['--quote', v4, ...root, '--collateral', dir, '--at', '2023-07-01T00:00:00Z'])).toBe(2);
    expect(stderr()).toContain('has no TCB info');
  });
});
