/**
 * `confboot/verify`'s verifyAttestation on the real evidence of ../shared/testvectors (read from
 * there at test time, never copied): the AWS NitroTPM document captured on EC2, GCE's go-tpm-tools
 * attestations, Azure, AWS and bare-metal SEV-SNP reports, and go-tdx-guest's TDX quotes with their
 * collateral, each at a time its certificates were valid. A tampered or foreign input is a refusal
 * (a result naming the failed check), and a request without trust input is an error.
 */
import { describe, expect, it } from 'vitest';
import { loadTdxCollateralDir } from '../../../src/adapters/attestation/tdx/collateral.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import { type VerifyResult, verifyAttestation } from '../../../src/verify.js';
import { describeVectors, VECTORS, vec, vecB64 } from '../../adapters/attestation/snp/vectors.js';

const T = (s: string) => new Date(s);
const failed = (r: VerifyResult) => r.checks.filter((c) => !c.ok).map((c) => `${c.name}: ${c.detail}`);
const flip = (b: Uint8Array, at: number) => {
  const copy = Buffer.from(b);
  copy[at] = (copy[at] ?? 0) ^ 0xff;
  return copy;
};

describeVectors('verifyAttestation on the real NitroTPM document', () => {
  const fixture = () =>
    JSON.parse(vec('aws-nitrotpm/vaportpm-test-nitro-fixture.json').toString('utf8')) as {
      nonce: string;
      attestation: { nitro: { document: string } };
    };
  const document = () => Buffer.from(fixture().attestation.nitro.document, 'hex');
  const nonce = () => Buffer.from(fixture().nonce, 'hex');
  const at = T('2026-02-03T10:30:00Z');

  it('accepts it at capture time, with its signed contents', async () => {
    const r = await verifyAttestation({ kind: 'nitrotpm', document: document(), nonce: nonce(), at });
    expect(failed(r)).toEqual([]);
    expect(r.accepted).toBe(true);
    expect(r.checks.map((c) => c.name)).toEqual([
      'nitrotpm-format',
      'nitrotpm-signature',
      'nitrotpm-certificate',
      'nitrotpm-nonce',
    ]);
    expect(r.nitroTpm?.moduleId).toBe('i-01cfb383223e42522-tpm0000000000000000');
    expect(r.nitroTpm?.pcrs.size).toBe(24);
  });

  it('refuses it with another nonce, after its leaf expired, and tampered', async () => {
    const other = await verifyAttestation({
      kind: 'nitrotpm',
      document: document(),
      nonce: flip(nonce(), 0),
      at,
    });
    expect(other).toMatchObject({ accepted: false, failedCheck: 'nitrotpm-nonce' });
    const late = await verifyAttestation({
      kind: 'nitrotpm',
      document: document(),
      nonce: nonce(),
      at: T('2026-11-21T00:00:00Z'),
    });
    expect(late).toMatchObject({ accepted: false, failedCheck: 'nitrotpm-certificate' });
    const doc = document();
    const tampered = await verifyAttestation({
      kind: 'nitrotpm',
      document: flip(doc, doc.length - 5),
      nonce: nonce(),
      at,
    });
    expect(tampered.accepted).toBe(false);
  });
});

describeVectors("verifyAttestation on GCE's real go-tpm-tools attestations", () => {
  const roots = () => [
    vec('go-tpm-tools/ca-certs/tpm_ek_root_1.cer'),
    vec('go-tpm-tools/ca-certs/tpm_ek_intermediate_2.crt'),
  ];
  it.each([
    ['gce-cos-85-nonce9009.pb', Buffer.from([0x90, 0x09])],
    ['gce-cos-85-no-nonce.pb', Buffer.alloc(0)],
  ])('accepts %s with its AK certificate chained to the GCE EK root', async (file, nonce) => {
    const attestation = vec(`go-tpm-tools/attestations/${file}`);
    const r = await verifyAttestation({
      kind: 'go-tpm-tools',
      attestation,
      nonce,
      akRoots: roots(),
      at: T('2026-11-21T00:00:00Z'),
    });
    expect(failed(r)).toEqual([]);
    expect(r.accepted).toBe(true);
    expect(r.checks.find((c) => c.name === 'measurements')?.detail).toBe('not compared (no policy given)');
  });

  it('refuses a wrong nonce and needs AK trust input', async () => {
    const attestation = vec('go-tpm-tools/attestations/gce-cos-85-nonce9009.pb');
    const r = await verifyAttestation({
      kind: 'go-tpm-tools',
      attestation,
      nonce: Buffer.from([0x90, 0x0a]),
      akRoots: roots(),
    });
    expect(r.accepted).toBe(false);
    const err = await verifyAttestation({ kind: 'go-tpm-tools', attestation, nonce: Buffer.alloc(0) }).catch(
      (e) => e,
    );
    expect(isConfbootError(err) && err.code).toBe('invalid-argument');
  });
});

describeVectors('verifyAttestation on real SEV-SNP reports', () => {
  const AZURE_DIGEST = Buffer.from(
    '57e229e0ffe5fa92d0faddff6cae0e61c926fc9ef9afd20a8b8cfcf7129db9338cbe5bf3f6987733a2bf65d06dc38fc1',
    'hex',
  );
  it.each([
    {
      name: 'Azure (VCEK) with the ARK pinned by the caller',
      report: () => vec('constellation/snp/attestation.bin'),
      signer: 'constellation/snp/vcek.pem',
      chain: 'constellation/snp/certchain.pem',
      ark: 'constellation/trust-anchors/amd-ark-milan.pem',
      at: '2026-11-21T00:00:00Z',
      policy: { idKeyDigests: { accepted: [AZURE_DIGEST], enforcement: 'equal' as const } },
    },
    {
      name: "AWS (VLEK) with the chain's ARK checked against AMD's key",
      report: () => vecB64('constellation/aws-snp/report.txt'),
      signer: 'constellation/aws-snp/vlek.pem',
      chain: 'constellation/aws-snp/certchain.pem',
      at: '2025-06-01T00:00:00Z',
      policy: { reportData: vec('constellation/aws-snp/ak_digest.bin') },
    },
    {
      name: 'go-sev-guest Milan (debug allowed)',
      report: () => vec('go-sev-guest/verify-testdata/attestation.bin'),
      signer: 'go-sev-guest/verify-testdata/vcek.testcer',
      chain: 'go-sev-guest/trust/ask_ark_milan.pem',
      at: '2026-11-21T00:00:00Z',
      policy: { allowDebug: true },
    },
  ])('accepts $name', async ({ report, signer, chain, ark, at, policy }) => {
    const r = await verifyAttestation({
      kind: 'sev-snp-report',
      report: report(),
      signer: vec(signer),
      chain: vec(chain),
      ...(ark ? { ark: vec(ark) } : {}),
      policy,
      at: T(at),
    });
    expect(failed(r)).toEqual([]);
    expect(r.accepted).toBe(true);
    expect(r.checks.some((c) => c.name === 'ark-pin')).toBe(ark === undefined);
    expect(r.snp?.report?.version).toBeGreaterThanOrEqual(2);
  });

  it('refuses the Azure report with a zeroed signature and with a VLEK that did not sign it', async () => {
    const report = vec('constellation/snp/attestation.bin');
    const zeroed = Buffer.from(report);
    zeroed.fill(0, 0x2a0, 0x4a0);
    const base = {
      kind: 'sev-snp-report' as const,
      chain: vec('constellation/snp/certchain.pem'),
      at: T('2026-11-21T00:00:00Z'),
    };
    const r = await verifyAttestation({ ...base, report: zeroed, signer: vec('constellation/snp/vcek.pem') });
    expect(r).toMatchObject({ accepted: false, failedCheck: 'report-signature' });
    const other = await verifyAttestation({ ...base, report, signer: vec('constellation/snp/vlek.pem') });
    expect(other.accepted).toBe(false);
  });
});

describeVectors("verifyAttestation on go-tdx-guest's real TDX quotes", () => {
  const v4 = () => vec('go-tdx-guest/testdata/tdx_prod_quote_SPR_E4.dat');

  it('accepts the v4 quote with its collateral and both CRLs at 2023-07-01 (TCB level reported)', async () => {
    const collateral = await loadTdxCollateralDir(`${VECTORS}/go-tdx-guest/testdata`, '50806f000000');
    const r = await verifyAttestation({
      kind: 'tdx-quote',
      quote: v4(),
      root: vec('go-tdx-guest/trust/trusted_root.pem'),
      collateral,
      policy: { enforceTcbLevel: false },
      at: T('2023-07-01T00:00:00Z'),
    });
    expect(failed(r)).toEqual([]);
    expect(r.accepted).toBe(true);
    expect(r.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining(['quote-signature', 'pck-chain', 'root-crl']),
    );
    expect(Buffer.from(r.tdx?.pck?.fmspc ?? []).toString('hex')).toBe('50806f000000');
  });

  it("accepts the v5 quote's chain at 2026-02-03 with the chain's root checked against Intel's key", async () => {
    const r = await verifyAttestation({
      kind: 'tdx-quote',
      quote: vec('go-tdx-guest/testdata/quote_v5_sample.dat'),
      at: T('2026-02-03T00:00:00Z'),
    });
    expect(failed(r)).toEqual([]);
    expect(r.checks[0]).toMatchObject({ name: 'root-pin', ok: true });
  });

  it('refuses the v4 quote with a flipped body byte', async () => {
    const r = await verifyAttestation({
      kind: 'tdx-quote',
      quote: flip(v4(), 0x3c),
      at: T('2023-07-01T00:00:00Z'),
    });
    expect(r.accepted).toBe(false);
  });
});

describe('verifyAttestation input errors', () => {
  it.each([
    ['an unknown kind', { kind: 'pdf' }],
    [
      'a vTPM document without AK trust',
      {
        kind: 'document',
        variant: 'gcp-sev-es',
        document: Buffer.alloc(4),
        nonce: Buffer.alloc(0),
        policy: { compare: () => [] },
      },
    ],
    [
      'qemu-vtpm without AK trust',
      {
        kind: 'document',
        variant: 'qemu-vtpm',
        document: Buffer.alloc(4),
        nonce: Buffer.alloc(0),
        policy: { compare: () => [] },
      },
    ],
    [
      'an SEV-SNP document without a config',
      { kind: 'document', variant: 'azure-sev-snp', document: Buffer.alloc(4), nonce: Buffer.alloc(0) },
    ],
    [
      'an unknown variant',
      { kind: 'document', variant: 'dummy', document: Buffer.alloc(4), nonce: Buffer.alloc(0) },
    ],
  ])('rejects %s as invalid-argument', async (_name, request) => {
    const err = await verifyAttestation(request as never).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('invalid-argument');
  });
});
