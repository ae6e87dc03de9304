/**
 * The aws-sev-snp, gcp-sev-snp and azure-sev-snp validators end to end on vTPM attestation
 * documents. The TPM quote half is a STUB verifier (the real one is the vTPM validator's job): it
 * checks that it is asked with nonce SHA256(InstanceInfo ‖ SHA256(userData ‖ nonce)) and the
 * right AK. azure-sev-snp uses the REAL Azure report and runtime data (the AK is rebuilt from the
 * runtime data's HCLAkPub); aws/gcp use the FAKE AMD hierarchy, since no real documents exist.
 */
import { createHash, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { VerifyVtpmQuote } from '../../../../src/adapters/attestation/shared/cvm-document.js';
import { AmdCertCache } from '../../../../src/adapters/attestation/snp/cert-cache.js';
import { createSnpTdxValidator } from '../../../../src/adapters/attestation/snp/factory.js';
import type { SnpValidatorConfig } from '../../../../src/adapters/attestation/snp/validators.js';
import type { AmdCertFetcher } from '../../../../src/ports/amd-cert-fetcher.js';
import type { MeasurementPolicy } from '../../../../src/ports/measurement-policy.js';
import type { MeasurementMismatch } from '../../../../src/ports/types.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import { buildFakeReport, createFakeAmdPki, type FakeAmdPki } from './fake-amd-pki.js';
import { rsaTpmtPublic } from './tpmt-fixture.js';
import { describeVectors, vec } from './vectors.js';

const b64 = (b: Uint8Array | string) => Buffer.from(b).toString('base64');

function modulusOf(key: KeyObject): Buffer {
  return Buffer.from(key.export({ format: 'jwk' }).n as string, 'base64url');
}

/** Measurement policy over a fixed map (compare like the domain's policy does). */
function measurements(expected: Map<number, Uint8Array>): MeasurementPolicy {
  return {
    compare(actual) {
      const out: MeasurementMismatch[] = [];
      for (const [index, want] of [...expected].sort((a, b) => a[0] - b[0])) {
        const got = actual.get(index);
        if (got === undefined || !Buffer.from(got).equals(Buffer.from(want)))
          out.push({ index, expected: want, actual: got, warnOnly: false });
      }
      return out;
    },
  };
}

const PCR4 = new Uint8Array(32).fill(4);

/** STUB vTPM verifier: records calls and returns PCR 4. */
function stubVtpm(calls: { nonce: Uint8Array; ak: KeyObject }[], pcr4 = PCR4): VerifyVtpmQuote {
  return async (_att, expected) => {
    calls.push({ nonce: expected.nonce, ak: expected.trustedAk });
    return { pcrs: new Map([[4, pcr4]]), checks: [{ name: 'stub-tpm-quote', ok: true, detail: 'STUB' }] };
  };
}

function document(
  akPub: Uint8Array,
  instanceInfo: object,
  userData: Uint8Array,
): { doc: Uint8Array; info: Buffer } {
  const info = Buffer.from(JSON.stringify(instanceInfo));
  return {
    doc: Buffer.from(
      JSON.stringify({
        Attestation: { ak_pub: b64(akPub), quotes: [] },
        InstanceInfo: b64(info),
        UserData: b64(userData),
      }),
    ),
    info,
  };
}

const expectedTpmNonce = (info: Uint8Array, userData: Uint8Array, nonce: Uint8Array) =>
  createHash('sha256')
    .update(info)
    .update(createHash('sha256').update(userData).update(nonce).digest())
    .digest();

const rejection = attestationRejection;

describeVectors('azure-sev-snp validator on the real Azure report (STUB vTPM verifier)', () => {
  const runtime = () => vec('constellation/snp/runtimedata.bin');
  const akModulus = () =>
    Buffer.from(
      (JSON.parse(runtime().toString('utf8')) as { keys: { n: string }[] }).keys[0]?.n ?? '',
      'base64url',
    );
  const userData = Buffer.from('spki-hash-of-the-tls-key');
  const nonce = Buffer.alloc(32, 0x42);
  const info = (extra: object = {}) => ({
    ReportSigner: b64(vec('constellation/snp/vcek.pem')),
    CertChain: b64(vec('constellation/snp/certchain.pem')),
    AttestationReport: b64(vec('constellation/snp/attestation.bin')),
    Azure: { RuntimeData: b64(runtime()), MAAToken: '' },
    GCP: null,
    ...extra,
  });
  const config = (
    calls: { nonce: Uint8Array; ak: KeyObject }[],
    extra: Partial<SnpValidatorConfig> = {},
  ): SnpValidatorConfig => ({
    policy: {
      arks: { milan: vec('constellation/trust-anchors/amd-ark-milan.pem') },
      idKeyDigests: {
        accepted: [
          Buffer.from(
            '57e229e0ffe5fa92d0faddff6cae0e61c926fc9ef9afd20a8b8cfcf7129db9338cbe5bf3f6987733a2bf65d06dc38fc1',
            'hex',
          ),
        ],
        enforcement: 'equal',
      },
      minimumTcb: { bl: 2, tee: 0, snp: 6, ucode: 93 },
    },
    measurements: measurements(new Map([[4, PCR4]])),
    verifyVtpmQuote: stubVtpm(calls),
    clock: new FakeClock(new Date('2026-11-21T00:00:00Z')),
    ...extra,
  });

  it('accepts, and asks the vTPM verifier with SHA256(InstanceInfo ‖ extraData) and the HCL AK', async () => {
    const calls: { nonce: Uint8Array; ak: KeyObject }[] = [];
    const { doc, info: raw } = document(rsaTpmtPublic(akModulus()), info(), userData);
    const v = createSnpTdxValidator('azure-sev-snp', config(calls));
    expect(v.oid).toBe('1.3.9900.4.1');
    const res = await v.validate(doc, nonce);
    expect(Buffer.from(res.userData).equals(userData)).toBe(true);
    expect(res.checks.filter((c) => !c.ok)).toEqual([]);
    expect(res.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'report-signature',
        'hcl-runtime-data-hash',
        'hcl-ak',
        'id-key-digest',
        'stub-tpm-quote',
        'measurements',
      ]),
    );
    expect(calls).toHaveLength(1);
    expect(Buffer.from(calls[0]?.nonce ?? []).equals(expectedTpmNonce(raw, userData, nonce))).toBe(true);
    expect(modulusOf(calls[0]?.ak as KeyObject).equals(akModulus())).toBe(true);
  });

  it.each([
    ['an object as AttestationReport', { AttestationReport: {} }],
    ['a number as ReportSigner', { ReportSigner: 7 }],
    ['an array as Azure.RuntimeData', { Azure: { RuntimeData: [], MAAToken: '' } }],
    [
      'a VCEK with an unparsable validity date',
      {
        ReportSigner: b64(
          Buffer.from(
            vec('constellation/snp/vcek.pem')
              .toString('latin1')
              .replace(/^(.{322})I/s, '$1/'),
            'latin1',
          ),
        ),
      },
    ],
    [
      'a certificate chain with a corrupted ASK key',
      {
        CertChain: b64(
          Buffer.from(
            vec('constellation/snp/certchain.pem')
              .toString('latin1')
              .replace(/^(.{571})C/s, '$1i'),
            'latin1',
          ),
        ),
      },
    ],
  ])('answers %s with an AttestationError, never a stray error (fuzz finding)', async (_name, extra) => {
    const { doc } = document(rsaTpmtPublic(akModulus()), info(extra), userData);
    const r = await rejection(createSnpTdxValidator('azure-sev-snp', config([])).validate(doc, nonce));
    expect(r.check).not.toBe('');
  });

  it('rejects an AK that is not the runtime data key (hcl-ak)', async () => {
    const other = Buffer.from(akModulus());
    other[7] = (other[7] as number) ^ 1;
    const { doc } = document(rsaTpmtPublic(other), info(), userData);
    const r = await rejection(createSnpTdxValidator('azure-sev-snp', config([])).validate(doc, nonce));
    expect(r.check).toBe('hcl-ak');
  });

  it('rejects truncated runtime data (hcl-runtime-data-hash)', async () => {
    const { doc } = document(
      rsaTpmtPublic(akModulus()),
      info({ Azure: { RuntimeData: b64(runtime().subarray(0, 100)) } }),
      userData,
    );
    const r = await rejection(createSnpTdxValidator('azure-sev-snp', config([])).validate(doc, nonce));
    expect(r.check).toBe('hcl-runtime-data-hash');
  });

  it("rejects with upstream's default ID-key list (the digest is not in it)", async () => {
    const { doc } = document(rsaTpmtPublic(akModulus()), info(), userData);
    const cfg = config([]);
    cfg.policy = {
      ...cfg.policy,
      idKeyDigests: { accepted: [Buffer.from('035621'.padEnd(96, '0'), 'hex')], enforcement: 'equal' },
    };
    const r = await rejection(createSnpTdxValidator('azure-sev-snp', cfg).validate(doc, nonce));
    expect(r.check).toBe('id-key-digest');
    expect(r.message).toContain('report ID key not trusted');
  });

  it('rejects a PCR mismatch with expected and actual values (measurements)', async () => {
    const { doc } = document(rsaTpmtPublic(akModulus()), info(), userData);
    const cfg = config([], { measurements: measurements(new Map([[4, new Uint8Array(32)]])) });
    const r = await rejection(createSnpTdxValidator('azure-sev-snp', cfg).validate(doc, nonce));
    expect(r.check).toBe('measurements');
    expect(r.message).toContain(`PCR4: expected ${'00'.repeat(32)}, got ${'04'.repeat(32)}`);
  });

  it('without CertChain, takes the ASK from the certificate cache (FAKE fetcher serving the real chain)', async () => {
    const pem = vec('go-sev-guest/trust/ask_ark_milan.pem').toString('latin1');
    const ders = [...pem.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END/g)].map((m) =>
      Buffer.from((m[1] ?? '').replace(/\s/g, ''), 'base64'),
    );
    const fetcher: AmdCertFetcher = {
      fetchVcek: async () => vec('constellation/snp/vcek.cert'),
      fetchCertChain: async () => ders,
    };
    const clock = new FakeClock(new Date('2026-11-21T00:00:00Z'));
    const cache = new AmdCertCache(fetcher, clock);
    const { doc } = document(
      rsaTpmtPublic(akModulus()),
      info({ CertChain: null, ReportSigner: null }),
      userData,
    );
    const v = createSnpTdxValidator('azure-sev-snp', config([], { certCache: cache, clock }));
    const res = await clock.runUntil(v.validate(doc, nonce));
    expect(res.checks.every((c) => c.ok)).toBe(true);
    expect(cache.fetches).toBe(2);
  });

  it('without CertChain and without a cache, names the missing ASK', async () => {
    const { doc } = document(rsaTpmtPublic(akModulus()), info({ CertChain: null }), userData);
    const r = await rejection(createSnpTdxValidator('azure-sev-snp', config([])).validate(doc, nonce));
    expect(r.check).toBe('ask-signature');
    expect(r.message).toContain('no ASK/ASVK supplied');
  });

  it('rejects a malformed document (document-format)', async () => {
    const r = await rejection(
      createSnpTdxValidator('azure-sev-snp', config([])).validate(Buffer.from('{"Attestation":null}'), nonce),
    );
    expect(r.check).toBe('document-format');
  });
});

describe('aws-sev-snp and gcp-sev-snp validators on a FAKE AMD hierarchy (STUB vTPM verifier)', () => {
  let pki: FakeAmdPki;
  let ak: KeyObject;
  beforeAll(async () => {
    pki = await createFakeAmdPki();
    ak = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
  }, 30_000);
  const userData = Buffer.from('user-data');
  const nonce = Buffer.alloc(32, 7);
  const clock = () => new FakeClock(new Date('2026-01-01T00:00:00Z'));
  const awsDigest = (key: KeyObject) =>
    createHash('sha512')
      .update(key.export({ type: 'spki', format: 'der' }))
      .digest();

  const awsConfig = (calls: { nonce: Uint8Array; ak: KeyObject }[]): SnpValidatorConfig => {
    const fetcher: AmdCertFetcher = {
      fetchVcek: async () => {
        throw new Error('VLEKs are never fetched');
      },
      fetchCertChain: async (_p, signer) => {
        expect(signer).toBe('vlek');
        return [Buffer.from(pki.asvkPem.replace(/-----[A-Z ]+-----|\s/g, ''), 'base64')];
      },
    };
    const c = clock();
    return {
      policy: { arks: { milan: pki.arkPem }, allowedSigners: ['vlek'] },
      measurements: measurements(new Map([[4, PCR4]])),
      verifyVtpmQuote: stubVtpm(calls),
      clock: c,
      certCache: new AmdCertCache(fetcher, c, { minIntervalInMs: 0 }),
    };
  };

  it('aws-sev-snp accepts a VLEK report whose report_data is SHA-512 of the AK (ASVK from the cache)', async () => {
    const calls: { nonce: Uint8Array; ak: KeyObject }[] = [];
    const report = buildFakeReport(pki, { signingKey: 'vlek', reportData: awsDigest(ak) });
    const { doc, info } = document(
      rsaTpmtPublic(modulusOf(ak)),
      { ReportSigner: b64(pki.vlekPem), AttestationReport: b64(report), Azure: null, GCP: null },
      userData,
    );
    const res = await createSnpTdxValidator('aws-sev-snp', awsConfig(calls)).validate(doc, nonce);
    expect(res.checks.find((c) => c.name === 'report-data')?.ok).toBe(true);
    expect(Buffer.from(calls[0]?.nonce ?? []).equals(expectedTpmNonce(info, userData, nonce))).toBe(true);
  });

  it('aws-sev-snp rejects a report bound to another AK (report-data)', async () => {
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
    const report = buildFakeReport(pki, { signingKey: 'vlek', reportData: awsDigest(other) });
    const { doc } = document(
      rsaTpmtPublic(modulusOf(ak)),
      { ReportSigner: b64(pki.vlekPem), AttestationReport: b64(report) },
      userData,
    );
    const r = await rejection(createSnpTdxValidator('aws-sev-snp', awsConfig([])).validate(doc, nonce));
    expect(r.check).toBe('report-data');
  });

  const gcpConfig = (
    calls: { nonce: Uint8Array; ak: KeyObject }[],
    gceAk: KeyObject,
  ): SnpValidatorConfig => ({
    policy: { arks: { milan: pki.arkPem } },
    measurements: measurements(new Map([[4, PCR4]])),
    verifyVtpmQuote: stubVtpm(calls),
    clock: clock(),
    gceAkPublicKey: async (instance) => {
      expect(instance).toEqual({ zone: 'us-central1-a', project_id: 'p', instance_name: 'n' });
      return gceAk;
    },
  });
  const gcpDoc = (reportData: Uint8Array) =>
    document(
      rsaTpmtPublic(modulusOf(ak)),
      {
        ReportSigner: b64(pki.vcekPem),
        CertChain: b64(pki.askPem),
        AttestationReport: b64(buildFakeReport(pki, { reportData })),
        GCP: { zone: 'us-central1-a', project_id: 'p', instance_name: 'n' },
      },
      userData,
    );

  it('gcp-sev-snp accepts report_data = extraData and hands the GCE AK to the vTPM verifier', async () => {
    const calls: { nonce: Uint8Array; ak: KeyObject }[] = [];
    const gceAk = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
    const extraData = createHash('sha256').update(userData).update(nonce).digest();
    const { doc } = gcpDoc(extraData);
    const res = await createSnpTdxValidator('gcp-sev-snp', gcpConfig(calls, gceAk)).validate(doc, nonce);
    expect(res.checks.find((c) => c.name === 'gce-ak')?.ok).toBe(true);
    expect(calls[0]?.ak).toBe(gceAk);
  });

  it('gcp-sev-snp rejects a report made for another nonce (report-data)', async () => {
    const extraData = createHash('sha256').update(userData).update(Buffer.alloc(32, 8)).digest();
    const { doc } = gcpDoc(extraData);
    const r = await rejection(createSnpTdxValidator('gcp-sev-snp', gcpConfig([], ak)).validate(doc, nonce));
    expect(r.check).toBe('report-data');
  });

  it('gcp-sev-snp cannot be built without the GCE AK lookup', () => {
    const cfg = gcpConfig([], ak);
    delete cfg.gceAkPublicKey;
    expect(() => createSnpTdxValidator('gcp-sev-snp', cfg)).toThrow(/needs gceAkPublicKey/);
  });
});
