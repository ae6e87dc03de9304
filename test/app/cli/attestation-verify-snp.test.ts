/**
 * `confboot attestation verify-snp` run() on the real go-sev-guest Milan report with its VCEK
 * (done-when: accepted as is, rejected after any single byte of its 512-byte signature field
 * changes), plus the other vectors and usage/input errors (exit 2).
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { run } from '../../../src/app/cli/attestation-verify-snp.js';
import { createFakeAmdPki } from '../../adapters/attestation/snp/fake-amd-pki.js';
import { describeVectors, VECTORS, vec } from '../../adapters/attestation/snp/vectors.js';
import { captureStdio } from '../../support/stdio.js';
import { useTmpDirs } from '../../support/tmp.js';

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

  it('rejects with --deny-debug (the guest policy allows debugging); by default that is reported, not enforced', async () => {
    const args = goSev.filter((a) => a !== '--allow-debug');
    const report = v('go-sev-guest/verify-testdata/attestation.bin');
    expect(await run(['--report', report, ...args, '--deny-debug'])).toBe(1);
    expect(stdout()).toContain('FAIL  guest-policy-debug');
    clearStdout();
    expect(await run(['--report', report, ...args])).toBe(0);
    expect(stdout()).toContain('PASS  guest-policy-debug: guest policy 0xb0000 allows debugging');
  });

  it("the issue's form --report F --signer F --chain F: the chain's ARK is trusted by AMD's built-in Milan key pin", async () => {
    const report = v('go-sev-guest/verify-testdata/attestation.bin');
    const signer = ['--signer', v('go-sev-guest/verify-testdata/vcek.testcer')];
    const chain = ['--chain', v('go-sev-guest/trust/ask_ark_milan.pem')];
    expect(await run(['--report', report, ...signer, ...chain])).toBe(0);
    expect(stdout()).toContain(
      "PASS  ark-pin: ARK-Milan from --chain carries AMD's ARK-Milan key (built-in pin)",
    );
    expect(stdout().trim().endsWith('ACCEPTED')).toBe(true);
    clearStdout();
    // One changed signature byte is still rejected on this path.
    const flipped = Buffer.from(vec('go-sev-guest/verify-testdata/attestation.bin'));
    flipped[0x2a0] = (flipped[0x2a0] as number) ^ 0x01;
    const file = join(tmp(), 'flipped.bin');
    writeFileSync(file, flipped);
    expect(await run(['--report', file, ...signer, ...chain])).toBe(1);
    expect(stdout()).toContain('FAIL  report-signature');
    clearStdout();
    // The Genoa chain's ARK is not AMD's Milan key.
    expect(
      await run(['--report', report, ...signer, '--chain', v('go-sev-guest/trust/ask_ark_genoa.pem')]),
    ).toBe(1);
    expect(stdout()).toContain('FAIL  ark-pin: the ARK in --chain has key SHA-256 429a69c9');
    clearStdout();
    // Neither --ark nor an ARK in --chain: nothing to pin.
    const askOnly = join(tmp(), 'ask.pem');
    writeFileSync(
      askOnly,
      vec('go-sev-guest/trust/ask_ark_milan.pem').toString('latin1').split('-----END CERTIFICATE-----')[0] +
        '-----END CERTIFICATE-----\n',
    );
    expect(await run(['--report', report, ...signer, '--chain', askOnly])).toBe(2);
    expect(stderr()).toContain('no ARK: pass --ark F, or a --chain holding the ARK-Milan certificate');
  });

  it('without --chain and --ark, fetches the chain from AMD KDS (a FAKE KDS here) and trusts its ARK only with the built-in pin', async () => {
    const report = v('go-sev-guest/verify-testdata/attestation.bin');
    const signer = ['--signer', v('go-sev-guest/verify-testdata/vcek.testcer')];
    const forged = await createFakeAmdPki();
    let chainPem = vec('go-sev-guest/trust/ask_ark_milan.pem').toString('latin1');
    const paths: string[] = [];
    const kds = createServer((req, res) => {
      paths.push(req.url ?? '');
      if (req.url === '/vcek/v1/Milan/cert_chain') res.writeHead(200).end(chainPem);
      else res.writeHead(404).end('not found');
    });
    await new Promise<void>((resolve) => kds.listen(0, '127.0.0.1', resolve));
    const addr = kds.address();
    const kdsUrl = ['--kds-url', `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`];
    try {
      expect(await run(['--report', report, ...signer, ...kdsUrl])).toBe(0);
      expect(paths).toEqual(['/vcek/v1/Milan/cert_chain']);
      expect(stdout()).toContain('PASS  ark-pin');
      clearStdout();

      chainPem = forged.askPem + forged.arkPem; // a look-alike "ARK-Milan" that is not AMD's key
      expect(await run(['--report', report, ...signer, ...kdsUrl])).toBe(1);
      expect(stdout()).toMatch(
        /FAIL {2}ark-pin: the ARK in --chain has key SHA-256 [0-9a-f]{64}, not AMD's ARK-Milan key/,
      );
    } finally {
      await new Promise((resolve) => kds.close(resolve));
    }
    expect(await run(['--report', report, ...signer, ...kdsUrl])).toBe(2);
    expect(stderr()).toMatch(/GET http:\/\/127\.0\.0\.1:\d+\/vcek\/v1\/Milan\/cert_chain/);
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
    const json = (
      JSON.parse(stdout()) as {
        result: {
          accepted: boolean;
          report: { version: number; signingKey: string };
        };
      }
    ).result;
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
    ['missing --signer', ['--report', 'x'], 'missing required option --signer'],
    [
      '--allow-debug with --deny-debug',
      ['--report', 'x', '--signer', 'y', '--allow-debug', '--deny-debug'],
      'contradict',
    ],
    [
      'unknown product',
      ['--report', 'x', '--signer', 'y', '--ark', 'z', '--product', 'naples'],
      '--product: want one of',
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
