/**
 * verifySnpReport on the real reports of ../shared/testvectors (README §2.1, §2.2, §3), each at the
 * clock the README states, and every negative case listed there rejected for its own reason. A
 * FAKE AMD hierarchy (fake-amd-pki.ts) covers rules that need a validly signed report with chosen
 * fields.
 */
import type { X509Certificate } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadCertificates } from '../../../../src/adapters/attestation/shared/certs.js';
import type { SnpPolicy } from '../../../../src/adapters/attestation/snp/policy.js';
import { type SnpVerification, verifySnpReport } from '../../../../src/adapters/attestation/snp/verify.js';
import { buildFakeReport, createFakeAmdPki, type FakeAmdPki } from './fake-amd-pki.js';
import { describeVectors, vec, vecB64 } from './vectors.js';

const failed = (v: SnpVerification) => v.checks.filter((c) => !c.ok).map((c) => c.name);
const detail = (v: SnpVerification, name: string) => v.checks.find((c) => c.name === name)?.detail ?? '';
const chainOf = (path: string) => {
  const [ask, ark] = loadCertificates(vec(path));
  return { ask, ark };
};

describeVectors('verifySnpReport on real reports', () => {
  const ark = () => vec('constellation/trust-anchors/amd-ark-milan.pem');
  const policy = (extra: Partial<SnpPolicy> = {}): SnpPolicy => ({ arks: { milan: ark() }, ...extra });
  const AZURE_DIGEST = Buffer.from(
    '57e229e0ffe5fa92d0faddff6cae0e61c926fc9ef9afd20a8b8cfcf7129db9338cbe5bf3f6987733a2bf65d06dc38fc1',
    'hex',
  );
  const NOW = new Date('2026-11-21T00:00:00Z');

  const accepted = [
    {
      name: 'constellation/snp (Azure, VCEK, 20 trailing bytes) now',
      report: () => vec('constellation/snp/attestation.bin'),
      signer: () => vec('constellation/snp/vcek.pem'),
      chain: 'constellation/snp/certchain.pem',
      at: NOW,
      extra: { idKeyDigests: { accepted: [AZURE_DIGEST], enforcement: 'equal' as const } },
    },
    {
      name: 'constellation/snp with vcek.cert (DER) now',
      report: () => vec('constellation/snp/attestation.bin'),
      signer: () => vec('constellation/snp/vcek.cert'),
      chain: 'constellation/snp/certchain.pem',
      at: NOW,
      extra: {},
    },
    {
      name: 'aws-snp current (v3, VLEK) at 2025-06-01',
      report: () => vecB64('constellation/aws-snp/report.txt'),
      signer: () => vec('constellation/aws-snp/vlek.pem'),
      chain: 'constellation/aws-snp/certchain.pem',
      at: new Date('2025-06-01T00:00:00Z'),
      extra: { reportData: vec('constellation/aws-snp/ak_digest.bin'), allowedSigners: ['vlek' as const] },
    },
    {
      name: 'aws-snp history 2023-11 (VLEK cc-us-east-2) at 2024-01-01',
      report: () => vecB64('constellation/aws-snp/history/2023-11_07eed0e/report.txt'),
      signer: () => vec('constellation/aws-snp/history/2023-11_07eed0e/vlek.pem'),
      chain: 'constellation/aws-snp/certchain.pem',
      at: new Date('2024-01-01T00:00:00Z'),
      extra: { reportData: vec('constellation/aws-snp/history/2023-11_07eed0e/ak_digest.bin') },
    },
    {
      name: 'aws-snp history 2024-07 (VLEK cc-eu-west-1) at 2024-07-01',
      report: () => vecB64('constellation/aws-snp/history/2024-07_a56822b/report.txt'),
      signer: () => vec('constellation/aws-snp/history/2024-07_a56822b/vlek.pem'),
      chain: 'constellation/aws-snp/certchain.pem',
      at: new Date('2024-07-01T00:00:00Z'),
      extra: { reportData: vec('constellation/aws-snp/history/2024-07_a56822b/ak_digest.bin') },
    },
    {
      name: 'attestation_vlek.bin with signer_vlek.der at 2023-06-01',
      report: () => vec('constellation/snp/attestation_vlek.bin'),
      signer: () => vec('constellation/snp/attestation_vlek.signer_vlek.der'),
      chain: 'constellation/snp/vlekcertchain.pem',
      at: new Date('2023-06-01T00:00:00Z'),
      extra: {},
    },
    {
      name: 'go-sev-guest Milan (debug policy allowed) now',
      report: () => vec('go-sev-guest/verify-testdata/attestation.bin'),
      signer: () => vec('go-sev-guest/verify-testdata/vcek.testcer'),
      chain: 'go-sev-guest/trust/ask_ark_milan.pem',
      at: NOW,
      extra: {
        allowDebug: true,
        minimumTcb: { bl: 2, tee: 0, snp: 5, ucode: 68 },
        minimumLaunchTcb: { bl: 2, tee: 0, snp: 5, ucode: 68 },
      },
    },
  ];

  it.each(accepted)('accepts $name', ({ report, signer, chain, at, extra }) => {
    const v = verifySnpReport(report(), signer(), chainOf(chain), policy(extra), at);
    expect(failed(v)).toEqual([]);
    expect(v.accepted).toBe(true);
    expect(v.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'report-signature',
        'ark-pinned',
        'ask-signature',
        'signer-chain',
        'reported-tcb',
        'vmpl',
      ]),
    );
  });

  it('reads the Azure report fields the README states', () => {
    const v = verifySnpReport(
      vec('constellation/snp/attestation.bin'),
      vec('constellation/snp/vcek.pem'),
      chainOf('constellation/snp/certchain.pem'),
      policy(),
      NOW,
    );
    const r = v.report;
    expect(r?.trailingBytes).toBe(20);
    expect(r?.policy.raw).toBe(0x3001fn);
    expect(Buffer.from(r?.idKeyDigest ?? []).equals(AZURE_DIGEST)).toBe(true);
    expect(v.signer?.tcb).toEqual({ bl: 2, tee: 0, snp: 6, ucode: 93 });
    expect(v.signer?.productName).toBe('Milan-B0');
  });

  describe('rejects, each for its own reason', () => {
    const azure = () => Buffer.from(vec('constellation/snp/attestation.bin'));
    const azureVerify = (
      report: Uint8Array,
      extra: Partial<SnpPolicy> = {},
      chain = chainOf('constellation/snp/certchain.pem'),
      at = NOW,
    ) => verifySnpReport(report, vec('constellation/snp/vcek.pem'), chain, policy(extra), at);

    it('zeroed signature: report signature verification error', () => {
      const r = azure();
      r.fill(0, 0x2a0, 0x4a0);
      const v = azureVerify(r);
      expect(failed(v)).toEqual(['report-signature']);
      expect(detail(v, 'report-signature')).toContain('report signature verification error');
    });

    it('VMPL 1: report VMPL 1 is not 0', () => {
      const r = azure();
      r[0x30] = 1;
      const v = azureVerify(r);
      expect(failed(v)).toEqual(['report-signature', 'vmpl']);
      expect(detail(v, 'vmpl')).toBe('report VMPL 1 is not 0');
    });

    it('reported TCB below the minimum', () => {
      const v = azureVerify(azure(), { minimumTcb: { bl: 2, tee: 0, snp: 7, ucode: 93 } });
      expect(failed(v)).toEqual(['minimum-tcb']);
      expect(detail(v, 'minimum-tcb')).toContain('is below the minimum');
    });

    it('launch TCB below the minimum launch TCB', () => {
      const v = azureVerify(azure(), { minimumLaunchTcb: { bl: 2, tee: 0, snp: 6, ucode: 94 } });
      expect(failed(v)).toEqual(['minimum-launch-tcb']);
    });

    it('current UCODE 0x5c below the VCEK 0x5d: lower than the TCB of the VCEK', () => {
      const r = azure();
      r[0x38 + 7] = 0x5c;
      const v = azureVerify(r);
      expect(failed(v)).toEqual(expect.arrayContaining(['current-tcb', 'committed-tcb']));
      expect(detail(v, 'current-tcb')).toContain('lower than the TCB of the VCEK');
    });

    it('one byte changed at offset 1676 of certchain.pem (ASK signature)', () => {
      const pem = Buffer.from(vec('constellation/snp/certchain.pem'));
      pem[1676] = pem[1676] === 0x41 ? 0x42 : 0x41;
      const [ask, chainArk] = loadCertificates(pem);
      const v = azureVerify(azure(), {}, { ask, ark: chainArk });
      expect(failed(v)).toEqual(['ask-signature']);
      expect(detail(v, 'ask-signature')).toContain('does not verify with the pinned ARK-Milan');
    });

    it('ID-key digest of wrong size: bad hash size', () => {
      const v = azureVerify(azure(), {
        idKeyDigests: { accepted: [Uint8Array.of(0)], enforcement: 'equal' },
      });
      expect(failed(v)).toEqual(['id-key-digest']);
      expect(detail(v, 'id-key-digest')).toContain('bad hash size');
    });

    it('48 zero bytes as the only accepted digest: report ID key not trusted', () => {
      const v = azureVerify(azure(), {
        idKeyDigests: { accepted: [new Uint8Array(48)], enforcement: 'equal' },
      });
      expect(failed(v)).toEqual(['id-key-digest']);
      expect(detail(v, 'id-key-digest')).toContain('report ID key not trusted');
    });

    it('warn-only ID-key policy accepts and records a warning', () => {
      const v = azureVerify(azure(), {
        idKeyDigests: { accepted: [new Uint8Array(48)], enforcement: 'warn-only' },
      });
      expect(v.accepted).toBe(true);
      expect(v.warnings[0]).toContain('report ID key not trusted');
    });

    it('chain ARK is not the pinned ARK (Genoa ARK pinned for Milan)', () => {
      const genoaArk = loadCertificates(vec('go-sev-guest/trust/ask_ark_genoa.pem'))[1] as X509Certificate;
      const v = verifySnpReport(
        azure(),
        vec('constellation/snp/vcek.pem'),
        chainOf('constellation/snp/certchain.pem'),
        { arks: { milan: genoaArk.raw } },
        NOW,
      );
      expect(failed(v)).toEqual(['ark-pinned', 'ask-signature']);
    });

    it('wrong product: Genoa expected, Milan VCEK', () => {
      const genoa = loadCertificates(vec('go-sev-guest/trust/ask_ark_genoa.pem'));
      const v = verifySnpReport(
        azure(),
        vec('constellation/snp/vcek.pem'),
        { ask: genoa[0] },
        { product: 'genoa', arks: { genoa: (genoa[1] as X509Certificate).raw } },
        NOW,
      );
      expect(failed(v)).toContain('product');
      expect(detail(v, 'product')).toContain('want Genoa');
    });

    it('certificates used after the VCEK expired (2031)', () => {
      const v = azureVerify(azure(), {}, undefined, new Date('2031-01-01T00:00:00Z'));
      expect(failed(v)).toEqual(['certificate-validity']);
      expect(detail(v, 'certificate-validity')).toContain('SEV-VCEK');
    });

    it('aws-snp current at now (VLEK expired 2025-12-10)', () => {
      const v = verifySnpReport(
        vecB64('constellation/aws-snp/report.txt'),
        vec('constellation/aws-snp/vlek.pem'),
        chainOf('constellation/aws-snp/certchain.pem'),
        policy(),
        NOW,
      );
      expect(failed(v)).toEqual(['certificate-validity']);
      expect(detail(v, 'certificate-validity')).toContain('SEV-VLEK (valid 2024-12-10');
    });

    it('aws-snp before the VLEK was issued (2024-01-01)', () => {
      const v = verifySnpReport(
        vecB64('constellation/aws-snp/report.txt'),
        vec('constellation/aws-snp/vlek.pem'),
        chainOf('constellation/aws-snp/certchain.pem'),
        policy(),
        new Date('2024-01-01T00:00:00Z'),
      );
      expect(failed(v)).toEqual(['certificate-validity']);
    });

    it('aws-snp zeroed report_data: report-data mismatch (and signature)', () => {
      const r = vecB64('constellation/aws-snp/report.txt');
      r.fill(0, 0x50, 0x90);
      const v = verifySnpReport(
        r,
        vec('constellation/aws-snp/vlek.pem'),
        chainOf('constellation/aws-snp/certchain.pem'),
        policy({ reportData: vec('constellation/aws-snp/ak_digest.bin') }),
        new Date('2025-06-01T00:00:00Z'),
      );
      expect(failed(v)).toEqual(['report-signature', 'report-data']);
    });

    it('aws-snp signature[0]+1', () => {
      const r = vecB64('constellation/aws-snp/report.txt');
      r[0x2a0] = ((r[0x2a0] as number) + 1) & 0xff;
      const v = verifySnpReport(
        r,
        vec('constellation/aws-snp/vlek.pem'),
        chainOf('constellation/aws-snp/certchain.pem'),
        policy(),
        new Date('2025-06-01T00:00:00Z'),
      );
      expect(failed(v)).toEqual(['report-signature']);
    });

    it('wrong VLEK: attestation_vlek.bin does NOT verify with constellation/snp/vlek.pem', () => {
      const v = verifySnpReport(
        vec('constellation/snp/attestation_vlek.bin'),
        vec('constellation/snp/vlek.pem'),
        chainOf('constellation/snp/vlekcertchain.pem'),
        policy(),
        new Date('2023-08-01T00:00:00Z'),
      );
      expect(failed(v)).toEqual(['report-signature']);
    });

    it('attestation_vlek.bin outside its VLEK validity (2024-05-01)', () => {
      const v = verifySnpReport(
        vec('constellation/snp/attestation_vlek.bin'),
        vec('constellation/snp/attestation_vlek.signer_vlek.der'),
        chainOf('constellation/snp/vlekcertchain.pem'),
        policy(),
        new Date('2024-05-01T00:00:00Z'),
      );
      expect(failed(v)).toEqual(['certificate-validity']);
    });

    it('VLEK report presented with a VCEK: signing-key mismatch', () => {
      const v = verifySnpReport(
        vec('constellation/snp/attestation_vlek.bin'),
        vec('constellation/snp/vcek.pem'),
        chainOf('constellation/snp/certchain.pem'),
        policy(),
        new Date('2023-09-01T00:00:00Z'),
      );
      expect(failed(v)).toContain('signing-key');
      expect(detail(v, 'signing-key')).toContain('report says signing key vlek');
    });

    it('VLEK reports refused when policy allows only VCEKs', () => {
      const v = verifySnpReport(
        vec('constellation/snp/attestation_vlek.bin'),
        vec('constellation/snp/attestation_vlek.signer_vlek.der'),
        chainOf('constellation/snp/vlekcertchain.pem'),
        policy({ allowedSigners: ['vcek'] }),
        new Date('2023-06-01T00:00:00Z'),
      );
      expect(failed(v)).toEqual(['signing-key']);
    });

    const goSev = () => Buffer.from(vec('go-sev-guest/verify-testdata/attestation.bin'));
    const goVerify = (r: Uint8Array, extra: Partial<SnpPolicy> = {}) =>
      verifySnpReport(
        r,
        vec('go-sev-guest/verify-testdata/vcek.testcer'),
        chainOf('go-sev-guest/trust/ask_ark_milan.pem'),
        policy({ allowDebug: true, ...extra }),
        NOW,
      );

    it('go-sev-guest: a policy without debug fails (the guest allows debugging)', () => {
      const v = goVerify(goSev(), { allowDebug: false });
      expect(failed(v)).toEqual(['guest-policy-debug']);
    });

    it('go-sev-guest: SMT forbidden by policy', () => {
      expect(failed(goVerify(goSev(), { allowSmt: false }))).toEqual(['guest-policy-smt']);
    });

    it('go-sev-guest: minimum TCB +1 fails', () => {
      expect(failed(goVerify(goSev(), { minimumTcb: { bl: 2, tee: 0, snp: 5, ucode: 69 } }))).toEqual([
        'minimum-tcb',
      ]);
    });

    it('go-sev-guest: required VMPL 1 fails', () => {
      expect(failed(goVerify(goSev(), { vmpl: 1 }))).toEqual(['vmpl']);
    });

    it('go-sev-guest: chip ID changed (not the VCEK hwID)', () => {
      const r = goSev();
      r[0x1a0] = (r[0x1a0] as number) ^ 1;
      expect(failed(goVerify(r))).toEqual(['report-signature', 'chip-id']);
    });

    it('truncated report (1183 bytes)', () => {
      const v = goVerify(goSev().subarray(0, 1183));
      expect(failed(v)).toEqual(['report-format']);
    });

    it('unsupported report version 1', () => {
      const r = goSev();
      r[0] = 1;
      expect(detail(goVerify(r), 'report-format')).toContain('version 1 is not supported');
    });

    it('throws when the policy pins no ARK for the product', () => {
      expect(() =>
        verifySnpReport(
          goSev(),
          vec('go-sev-guest/verify-testdata/vcek.testcer'),
          {},
          { product: 'turin', arks: {} },
          NOW,
        ),
      ).toThrow(/no pinned ARK for Turin/);
    });
  });
});

describe('verifySnpReport rules on a FAKE AMD hierarchy (validly signed reports with chosen fields)', () => {
  let pki: FakeAmdPki;
  beforeAll(async () => {
    pki = await createFakeAmdPki();
  }, 30_000);
  const AT = new Date('2026-01-01T00:00:00Z');
  const run = (report: Uint8Array, extra: Partial<SnpPolicy> = {}, kind: 'vcek' | 'vlek' = 'vcek') =>
    verifySnpReport(
      report,
      kind === 'vcek' ? pki.vcekPem : pki.vlekPem,
      { ask: kind === 'vcek' ? pki.askPem : pki.asvkPem },
      { arks: { milan: pki.arkPem }, ...extra },
      AT,
    );

  it('accepts a well-formed VCEK report and a VLEK report', () => {
    expect(failed(run(buildFakeReport(pki)))).toEqual([]);
    expect(failed(run(buildFakeReport(pki, { signingKey: 'vlek' }), {}, 'vlek'))).toEqual([]);
  });

  it('VMPL 1 with a valid signature fails only on vmpl', () => {
    expect(failed(run(buildFakeReport(pki, { vmpl: 1 })))).toEqual(['vmpl']);
  });

  it('reported TCB different from the VCEK TCB', () => {
    const v = run(buildFakeReport(pki, { reportedTcb: { ...pki.tcb, snp: pki.tcb.snp - 1 } }));
    expect(failed(v)).toEqual(['reported-tcb']);
    expect(detail(v, 'reported-tcb')).toContain('differs from the VCEK TCB');
  });

  it('current TCB below committed TCB', () => {
    const v = run(buildFakeReport(pki, { committedTcb: { ...pki.tcb, ucode: pki.tcb.ucode + 1 } }));
    expect(failed(v)).toEqual(['committed-tcb']);
  });

  it('launch TCB below the configured minimum launch TCB', () => {
    const v = run(buildFakeReport(pki, { launchTcb: { ...pki.tcb, snp: 1 } }), {
      minimumLaunchTcb: { bl: 0, tee: 0, snp: 2, ucode: 0 },
    });
    expect(failed(v)).toEqual(['minimum-launch-tcb']);
  });

  it('report data binding: equal passes, different fails', () => {
    const data = new Uint8Array(64).fill(7);
    expect(failed(run(buildFakeReport(pki, { reportData: data }), { reportData: data }))).toEqual([]);
    expect(
      failed(run(buildFakeReport(pki, { reportData: data }), { reportData: new Uint8Array(32) })),
    ).toEqual(['report-data']);
  });

  it('version 3 reports parse and verify', () => {
    expect(failed(run(buildFakeReport(pki, { version: 3 })))).toEqual([]);
  });
});
