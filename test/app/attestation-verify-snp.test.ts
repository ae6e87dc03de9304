/**
 * `confboot attestation verify-snp` run() on the real go-sev-guest Milan report with its VCEK
 * (done-when: accepted as is, rejected after any single byte of its 512-byte signature field
 * changes), plus the other vectors and usage/input errors (exit 2).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { run } from '../../src/app/cli/attestation-verify-snp.js';
import { describeVectors, VECTORS, vec } from '../adapters/attestation/snp/vectors.js';
import { captureStdio } from '../support/stdio.js';
import { useTmpDirs } from '../support/tmp.js';

const tmp = useTmpDirs('confboot-snp-cli-');
const v = (p: string) => join(VECTORS, p);
const { stdout, stderr, clearStdout } = captureStdio();

describeVectors('confboot attestation verify-snp', () => {
  const goSev = [
    '--signer',
    v('go-sev-guest/verify-testdata/vcek.testcer'),
    '--chain',
    v('go-sev-guest/trust/ask_ark_milan.pem'),
    '--ark',
    v('constellation/trust-anchors/amd-ark-milan.pem'),
    '--allow-debug',
  ];

  it('accepts the go-sev-guest Milan report with its VCEK (exit 0) and lists every check', async () => {
    expect(
      await run([
        '--report',
        v('go-sev-guest/verify-testdata/attestation.bin'),
        ...goSev,
        '--report-data',
        '0102030405',
      ]),
    ).toBe(0);
    const text = stdout();
    expect(text).toContain('PASS  report-signature');
    expect(text).toContain('PASS  ask-signature');
    expect(text).toContain('PASS  report-data');
    expect(text.trim().endsWith('ACCEPTED')).toBe(true);
  });

  it('rejects the go-sev-guest report after any single byte of its signature field changes (all 512)', async () => {
    const dir = tmp();
    const original = vec('go-sev-guest/verify-testdata/attestation.bin');
    const file = join(dir, 'report.bin');
    const codes = new Set<number>();
    let notRejected = 0;
    for (let off = 0x2a0; off < 0x4a0; off++) {
      const r = Buffer.from(original);
      r[off] = (r[off] as number) ^ 0x5a;
      writeFileSync(file, r);
      const code = await run(['--report', file, ...goSev]);
      codes.add(code);
      if (code !== 1) notRejected++;
    }
    expect(notRejected).toBe(0);
    expect([...codes]).toEqual([1]);
    expect(stdout()).toContain('FAIL  report-signature: report signature verification error');
  }, 60_000);

  it('rejects without --allow-debug (the guest policy allows debugging)', async () => {
    const args = goSev.filter((a) => a !== '--allow-debug');
    expect(await run(['--report', v('go-sev-guest/verify-testdata/attestation.bin'), ...args])).toBe(1);
    expect(stdout()).toContain('FAIL  guest-policy-debug');
  });

  it('accepts the base64 aws-snp report at 2025-06-01 with --json, rejects it now', async () => {
    const args = [
      '--report',
      v('constellation/aws-snp/report.txt'),
      '--signer',
      v('constellation/aws-snp/vlek.pem'),
      '--chain',
      v('constellation/aws-snp/certchain.pem'),
      '--ark',
      v('constellation/trust-anchors/amd-ark-milan.pem'),
    ];
    expect(await run([...args, '--at', '2025-06-01T00:00:00Z', '--json'])).toBe(0);
    const json = JSON.parse(stdout()) as {
      accepted: boolean;
      report: { version: number; signingKey: string };
    };
    expect(json).toMatchObject({ accepted: true, report: { version: 3, signingKey: 'vlek' } });
    clearStdout();
    expect(await run([...args, '--at', '2026-11-21T00:00:00Z'])).toBe(1);
    expect(stdout()).toContain('FAIL  certificate-validity');
  });

  it('takes the ASK from an AMD cert_chain bundle given as --ark when --chain is absent', async () => {
    expect(
      await run([
        '--report',
        v('constellation/snp/attestation.bin'),
        '--signer',
        v('constellation/snp/vcek.cert'),
        '--ark',
        v('go-sev-guest/trust/ask_ark_milan.pem'),
      ]),
    ).toBe(0);
  });

  it('rejects the wrong VLEK for attestation_vlek.bin', async () => {
    expect(
      await run([
        '--report',
        v('constellation/snp/attestation_vlek.bin'),
        '--signer',
        v('constellation/snp/vlek.pem'),
        '--chain',
        v('constellation/snp/vlekcertchain.pem'),
        '--ark',
        v('constellation/trust-anchors/amd-ark-milan.pem'),
        '--at',
        '2023-08-01T00:00:00Z',
      ]),
    ).toBe(1);
    expect(stdout()).toContain('FAIL  report-signature');
  });

  it('exits 2 when the --ark bundle holds no ARK for the product', async () => {
    expect(
      await run([
        '--report',
        v('constellation/snp/attestation.bin'),
        '--signer',
        v('constellation/snp/vcek.pem'),
        '--chain',
        v('constellation/snp/certchain.pem'),
        '--ark',
        v('go-sev-guest/trust/ask_ark_genoa.pem'),
        '--product',
        'milan',
      ]),
    ).toBe(2);
    expect(stderr()).toContain('holds no ARK-Milan');
  });

  it('rejects a chain whose ARK is not the pinned --ark (a lone Genoa ARK pinned for Milan)', async () => {
    const pem = vec('go-sev-guest/trust/ask_ark_genoa.pem').toString('latin1');
    const genoaArk = pem.slice(pem.lastIndexOf('-----BEGIN CERTIFICATE-----'));
    const file = join(tmp(), 'ark.pem');
    writeFileSync(file, genoaArk);
    expect(
      await run([
        '--report',
        v('constellation/snp/attestation.bin'),
        '--signer',
        v('constellation/snp/vcek.pem'),
        '--chain',
        v('constellation/snp/certchain.pem'),
        '--ark',
        file,
      ]),
    ).toBe(1);
    expect(stdout()).toContain('FAIL  ark-pinned');
    expect(stdout()).toContain('FAIL  ask-signature');
  });

  it.each([
    ['missing --ark', ['--report', 'x', '--signer', 'y'], 'missing required option --ark'],
    [
      'unknown product',
      ['--report', 'x', '--signer', 'y', '--ark', 'z', '--product', 'naples'],
      '--product must be one of',
    ],
    ['bad --at', ['--report', 'x', '--signer', 'y', '--ark', 'z', '--at', 'yesterday'], 'is not RFC 3339'],
    [
      'unreadable report',
      ['--report', '/nonexistent/r', '--signer', 'y', '--ark', 'z'],
      'reading report /nonexistent/r',
    ],
  ])('exits 2 on %s', async (_name, argv, message) => {
    expect(await run(argv)).toBe(2);
    expect(stderr()).toContain(message);
  });

  it('exits 2 on a report that is too short, and on a signer that is not a certificate', async () => {
    const dir = tmp();
    writeFileSync(join(dir, 'short.bin'), Buffer.alloc(100, 1));
    expect(await run(['--report', join(dir, 'short.bin'), ...goSev])).toBe(2);
    expect(stderr()).toContain('want at least 1184');
    expect(
      await run([
        '--report',
        v('go-sev-guest/verify-testdata/attestation.bin'),
        ...goSev.slice(2),
        '--signer',
        v('constellation/snp/runtimedata.bin'),
      ]),
    ).toBe(2);
  });
});
