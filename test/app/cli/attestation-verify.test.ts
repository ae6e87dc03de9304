/**
 * `confboot attestation verify` through run(): the real GCE protobuf attestations with the real
 * Google AK PKI, upstream-format JSON documents from the soft TPM, and the exit codes 0/1/2.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parseEventLog, replayEventLog } from '../../../src/adapters/attestation/eventlog/tcg-log.js';
import { run, type VerifyReport } from '../../../src/app/cli/attestation-verify.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../../support/soft-tpm.js';
import { useTmpDirs } from '../../support/tmp.js';

const vectors = resolve(import.meta.dirname, '../../../../shared/testvectors/go-tpm-tools');
const pb9009 = resolve(vectors, 'attestations/gce-cos-85-nonce9009.pb');
const pbNoNonce = resolve(vectors, 'attestations/gce-cos-85-no-nonce.pb');
const roots = [
  '--ak-roots',
  resolve(vectors, 'ca-certs/tpm_ek_root_1.cer'),
  '--ak-roots',
  resolve(vectors, 'ca-certs/tpm_ek_intermediate_2.crt'),
];
const PCR0 = '0f35c214608d93c7a6e68ae7359b4a8be5a0e99eea9107ece427c4dea4e439cf';
const PCR4 = 'd690bdac2aa8b73a1d718cb91990df07d0747b07ea57b3b2d0f0d511f0d90491';
const tmp = useTmpDirs('confboot-verify-');

let out = '';
let err = '';
beforeEach(() => {
  out = '';
  err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => {
    out += String(c);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
    err += String(c);
    return true;
  });
});
afterEach(() => {
  vi.restoreAllMocks();
});

function file(dir: string, name: string, content: string | Uint8Array): string {
  const p = join(dir, name);
  writeFileSync(p, content);
  return p;
}

describe('confboot attestation verify --format pb (real GCE attestations)', () => {
  it.each([
    [pb9009, '9009'],
    [pbNoNonce, ''],
  ])('accepts %s with its nonce and the AK chain to tpm_ek_root_1', async (doc, nonce) => {
    expect(await run(['--document', doc, '--format', 'pb', '--nonce', nonce, ...roots])).toBe(0);
    expect(out).toMatch(/^verdict: ACCEPTED \(pb\)/);
    for (const c of ['ak-certificate', 'quote-signature', 'extra-data', 'pcr-digest', 'event-log'])
      expect(out).toMatch(new RegExp(`ok +${c}`));
    expect(out).toMatch(/measurements +not compared/);
  });

  it('accepts a leading "verify" verb', async () => {
    expect(await run(['verify', '--document', pb9009, '--format', 'pb', '--nonce', '9009', ...roots])).toBe(
      0,
    );
  });

  it('rejects a wrong nonce with exit 1, naming the check', async () => {
    expect(await run(['--document', pb9009, '--format', 'pb', '--nonce', '9008', ...roots])).toBe(1);
    expect(out).toMatch(/verdict: REJECTED/);
    expect(out).toMatch(/reason: extra-data:/);
    expect(out).toMatch(/FAIL extra-data/);
  });

  it('rejects after the AK certificate expired (--at 2052)', async () => {
    expect(
      await run([
        '--document',
        pb9009,
        '--format',
        'pb',
        '--nonce',
        '9009',
        '--at',
        '2052-01-01T00:00:00Z',
        ...roots,
      ]),
    ).toBe(1);
    expect(out).toMatch(/FAIL ak-certificate/);
  });

  it('reports every mismatch as expected vs actual, as JSON too', async () => {
    const dir = tmp();
    const config = file(
      dir,
      'attestationConfig',
      JSON.stringify({
        measurements: {
          '0': { expected: PCR0, warnOnly: false },
          '4': { expected: 'aa'.repeat(32), warnOnly: false },
          '9': { expected: 'bb'.repeat(32), warnOnly: true },
          '15': { expected: '00'.repeat(32), warnOnly: false },
        },
      }),
    );
    expect(
      await run(['--document', pb9009, '--format', 'pb', '--nonce', '9009', '--config', config, ...roots]),
    ).toBe(1);
    expect(out).toContain(`PCR4: expected ${'aa'.repeat(32)}, got ${PCR4}`);
    expect(out).toMatch(new RegExp(`PCR9: expected ${'bb'.repeat(32)}, got [0-9a-f]{64} \\(warnOnly\\)`));
    out = '';
    expect(
      await run([
        '--document',
        pb9009,
        '--format',
        'pb',
        '--nonce',
        '9009',
        '--config',
        config,
        '--json',
        ...roots,
      ]),
    ).toBe(1);
    const report = (JSON.parse(out) as { result: VerifyReport }).result;
    expect(report.verdict).toBe('rejected');
    expect(report.failedCheck).toBe('measurements');
    expect(report.mismatches).toEqual([
      { index: 4, expected: 'aa'.repeat(32), actual: PCR4, warnOnly: false },
      { index: 9, expected: 'bb'.repeat(32), actual: expect.any(String), warnOnly: true },
    ]);
  });

  it('accepts matching measurements (bare map form) and lists a warnOnly mismatch', async () => {
    const dir = tmp();
    const config = file(
      dir,
      'm.json',
      JSON.stringify({
        '0': { expected: PCR0, warnOnly: false },
        '4': PCR4,
        '9': { expected: 'bb'.repeat(32), warnOnly: true },
      }),
    );
    expect(await run(['--document', pbNoNonce, '--format', 'pb', '--config', config, ...roots])).toBe(0);
    expect(out).toMatch(/with 1 warnOnly mismatch/);
    expect(out).toMatch(/PCR9: expected (bb){32}, got [0-9a-f]{64} \(warnOnly\)/);
  });

  it('accepts with --trusted-ak instead of roots', async () => {
    const dir = tmp();
    const { decodeAttestationPb } = await import('../../../src/adapters/attestation/shared/vtpm-document.js');
    const { parseCertificates } = await import('../../../src/adapters/attestation/shared/x509-chain.js');
    const cert = (await parseCertificates(decodeAttestationPb(readFileSync(pb9009)).akCert, 'ak'))[0];
    const pem = file(dir, 'ak.pem', cert?.publicKey.toString('pem') ?? '');
    expect(await run(['--document', pb9009, '--format', 'pb', '--nonce', '9009', '--trusted-ak', pem])).toBe(
      0,
    );
    expect(out).toMatch(/ok +ak-trust +attestation key equals the trusted AK/);
  });
});

describe('confboot attestation verify --format json (upstream documents)', () => {
  const tpm = SoftTpm.create();
  const userData = createHash('sha256').update('spki').digest();
  const nonce = randomBytes(32);

  /** An AK registry file (the join service's --qemu-ak-registry) holding `ak` for 10.0.0.5. */
  const registry = (dir: string, ak: Uint8Array) =>
    file(
      dir,
      'ak-registry.json',
      JSON.stringify({ vm: { ip: '10.0.0.5', attestationKeyPublic: Buffer.from(ak).toString('base64') } }),
    );

  it('accepts a qemu-vtpm document whose AK is registered for --peer-address and prints the user data; refuses another nonce', async () => {
    const dir = tmp();
    const doc = file(dir, 'doc.json', await new SoftVtpmIssuer(tpm).issue(userData, nonce));
    const config = file(
      dir,
      'c.json',
      JSON.stringify({ measurements: { '15': { expected: '00'.repeat(32), warnOnly: false } } }),
    );
    const trust = ['--qemu-ak-registry', registry(dir, tpm.akPublic), '--peer-address', '10.0.0.5'];
    expect(
      await run(['--document', doc, '--nonce', nonce.toString('hex'), '--config', config, ...trust]),
    ).toBe(0);
    expect(out).toMatch(/verdict: ACCEPTED \(json, qemu-vtpm\)/);
    expect(out).toMatch(/ok +ak-trust +attestation key is the one registered for vm \(10\.0\.0\.5\)/);
    expect(out).toContain(`userData: ${userData.toString('hex')}`);
    expect(await run(['--document', doc, '--nonce', randomBytes(32).toString('hex'), ...trust])).toBe(1);
  });

  it("qemu-vtpm applies the join service's AK rule: another AK is refused, no registry is a usage error unless --trust-ak-as-carried", async () => {
    const dir = tmp();
    const doc = file(dir, 'doc.json', await new SoftVtpmIssuer(tpm).issue(userData, nonce));
    const base = ['--document', doc, '--nonce', nonce.toString('hex')];
    const other = SoftTpm.create();
    expect(
      await run([...base, '--qemu-ak-registry', registry(dir, other.akPublic), '--peer-address', '10.0.0.5']),
    ).toBe(1);
    expect(out).toMatch(/reason: ak-trust: the document's attestation key is not the one registered for vm/);
    expect(
      await run([...base, '--qemu-ak-registry', registry(dir, tpm.akPublic), '--peer-address', '10.0.0.6']),
    ).toBe(1);
    expect(out).toMatch(/no VM registered at that address/);
    expect(await run([...base, '--qemu-ak-registry', registry(dir, tpm.akPublic)])).toBe(2);
    expect(err).toContain('--qemu-ak-registry needs --peer-address');
    err = '';
    expect(await run(base)).toBe(2);
    expect(err).toContain('qemu-vtpm needs the registered attestation keys (--qemu-ak-registry F)');
    expect(err).toContain('or pin the key with --trusted-ak');
    err = '';
    expect(await run([...base, '--trusted-ak', file(dir, 'ak.pem', tpm.akPublicKeyPem())])).toBe(0);
    expect(err).toBe('');
    expect(await run([...base, '--trust-ak-as-carried'])).toBe(0);
    expect(err).toContain('attestation verify: SECURITY: --trust-ak-as-carried is set');
  });

  it('verifies a gcp-sev-es document offline with --trusted-ak (CVM check from the event log)', async () => {
    const dir = tmp();
    const log = readFileSync(resolve(vectors, 'eventlogs/cos-85-amd-sev.bin'));
    const t = SoftTpm.create();
    for (const [i, v] of replayEventLog(parseEventLog(log)).get(SHA256) ?? []) t.setPcr(SHA256, i, v);
    const info = Buffer.from(JSON.stringify({ zone: 'us-central1-a', project_id: 'p', instance_name: 'n' }));
    const doc = file(
      dir,
      'doc.json',
      await new SoftVtpmIssuer(t, 'gcp-sev-es', { instanceInfo: info, eventLog: log }).issue(userData, nonce),
    );
    const ak = file(dir, 'ak.pem', t.akPublicKeyPem());
    expect(
      await run([
        '--document',
        doc,
        '--variant',
        'gcp-sev-es',
        '--nonce',
        nonce.toString('hex'),
        '--trusted-ak',
        ak,
        '--json',
      ]),
    ).toBe(0);
    const report = (JSON.parse(out) as { result: VerifyReport }).result;
    expect(report.checks.find((c) => c.name === 'cvm')?.detail).toMatch(/AMD_SEV/);
    out = '';
    const other = file(dir, 'other.pem', tpm.akPublicKeyPem());
    expect(
      await run([
        '--document',
        doc,
        '--variant',
        'gcp-sev-es',
        '--nonce',
        nonce.toString('hex'),
        '--trusted-ak',
        other,
      ]),
    ).toBe(1);
    expect(out).toMatch(/untrusted attestation public key/);
  });
});

describe('confboot attestation verify usage and input errors (exit 2)', () => {
  it.each([
    ['missing --document', []],
    ['bad hex nonce', ['--document', pb9009, '--nonce', 'xyz']],
    ['unknown format', ['--document', pb9009, '--format', 'xml']],
    ['dummy variant', ['--document', pb9009, '--variant', 'dummy']],
    ['SNP variant', ['--document', pb9009, '--variant', 'aws-sev-snp']],
    ['pb without trust', ['--document', pb9009, '--format', 'pb']],
    ['unreadable document', ['--document', '/nonexistent/doc', '--format', 'pb', ...roots]],
    ['bad --at', ['--document', pb9009, '--format', 'pb', '--at', 'yesterday', ...roots]],
    ['unknown flag', ['--document', pb9009, '--frobnicate']],
    ['azure without roots', ['--document', pb9009, '--variant', 'azure-trustedlaunch']],
  ])('%s', async (_name, argv) => {
    expect(await run(argv)).toBe(2);
    expect(err).toMatch(/^confboot: /);
  });

  it('a document that is not an attestation is an input error', async () => {
    const dir = tmp();
    const junk = file(dir, 'junk', 'not json');
    expect(await run(['--document', junk, '--trust-ak-as-carried'])).toBe(2);
    expect(err).toMatch(/document-format|invalid JSON/);
    expect(await run(['--document', junk, '--format', 'pb', ...roots])).toBe(2);
  });

  it('an invalid measurements config is an input error', async () => {
    const dir = tmp();
    const config = file(dir, 'c.json', '{"measurements": {}}');
    expect(await run(['--document', pb9009, '--format', 'pb', '--config', config, ...roots])).toBe(2);
  });

  it('--help prints the flags and exits 0', async () => {
    expect(await run(['--help'])).toBe(0);
    expect(out).toMatch(/--ak-roots F/);
  });
});
