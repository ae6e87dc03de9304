/**
 * verifyTdxQuote on the real quotes of ../shared/testvectors/go-tdx-guest (README §4): v4 with its
 * collateral at 2023-07-01, v5 and the CCEL quote with the chain only, the fields expected.json
 * lists, and the single-byte mutations of upstream's TestNegativeVerification, each rejected for
 * its own reason.
 */
import { describe, expect, it } from 'vitest';
import {
  loadTdxCollateralDir,
  type TdxCollateral,
} from '../../../../src/adapters/attestation/tdx/collateral.js';
import { parseTdxQuote, tdxMeasurements } from '../../../../src/adapters/attestation/tdx/quote.js';
import { type TdxVerification, verifyTdxQuote } from '../../../../src/adapters/attestation/tdx/verify.js';
import { describeVectors, VECTORS, vec } from '../snp/vectors.js';

const failed = (v: TdxVerification) => v.checks.filter((c) => !c.ok).map((c) => c.name);
const detail = (v: TdxVerification, name: string) => v.checks.find((c) => c.name === name)?.detail ?? '';
const hex = (b: Uint8Array | undefined) => Buffer.from(b ?? []).toString('hex');
const T = (s: string) => new Date(s);

describeVectors('TDX quotes (go-tdx-guest)', () => {
  const root = () => vec('go-tdx-guest/trust/trusted_root.pem');
  const v4 = () => Buffer.from(vec('go-tdx-guest/testdata/tdx_prod_quote_SPR_E4.dat'));
  const v5 = () => Buffer.from(vec('go-tdx-guest/testdata/quote_v5_sample.dat'));
  const ccel = () => Buffer.from(vec('go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat'));
  const expected = JSON.parse(vec('go-tdx-guest/expected.json').toString('utf8')) as {
    quotes: Record<
      string,
      { version: number; body: Record<string, string>; pck_fmspc: string; qe_report: { isvsvn: number } }
    >;
  };
  const collateral = () => loadTdxCollateralDir(`${VECTORS}/go-tdx-guest/testdata`, '50806f000000');

  it('answers a PCK certificate with a corrupted key with an AttestationError (fuzz finding: byte 1709 of the CCEL quote)', async () => {
    const q = ccel();
    q[1709] = 0x78;
    const outcome = await verifyTdxQuote(q, { root: root(), at: T('2026-11-21T00:00:00Z') }).catch(
      (e: unknown) => e,
    );
    if (outcome instanceof Error) expect(outcome.name).toBe('AttestationError');
    else expect((outcome as { accepted: boolean }).accepted).toBe(false);
  });

  const quotes = {
    'tdx_prod_quote_SPR_E4.dat': v4,
    'quote_v5_sample.dat': v5,
    'ccel/cos-113-tdx-quote.dat': ccel,
  };
  it.each([
    ['tdx_prod_quote_SPR_E4.dat', '2023-07-01T00:00:00Z'],
    ['quote_v5_sample.dat', '2026-02-03T00:00:00Z'],
    ['ccel/cos-113-tdx-quote.dat', '2026-11-21T00:00:00Z'],
  ] as const)('accepts %s with the chain only at %s', async (name, at) => {
    const quote = quotes[name];
    const v = await verifyTdxQuote(quote(), { root: root(), at: T(at) });
    expect(failed(v)).toEqual([]);
    const want = expected.quotes[name];
    const q = v.quote;
    expect(q?.version).toBe(want?.version);
    expect(hex(v.pck?.fmspc)).toBe(want?.pck_fmspc);
    expect(q?.qeReport.isvSvn).toBe(want?.qe_report.isvsvn);
    for (const field of [
      'mr_td',
      'mr_seam',
      'report_data',
      'tee_tcb_svn',
      'xfam',
      'td_attributes',
    ] as const) {
      const key = {
        mr_td: 'mrTd',
        mr_seam: 'mrSeam',
        report_data: 'reportData',
        tee_tcb_svn: 'teeTcbSvn',
        xfam: 'xfam',
        td_attributes: 'tdAttributes',
      }[field];
      expect(hex(q?.body[key as 'mrTd'] as Uint8Array), field).toBe(want?.body[field]);
    }
    const m = tdxMeasurements(q?.body as NonNullable<typeof q>['body']);
    expect(hex(m.get(0))).toBe(want?.body.mr_td);
    for (let i = 0; i < 4; i++) expect(hex(m.get(i + 1))).toBe(want?.body[`rtmr${i}`]);
  });

  it('v5 quote carries the TDX 1.5 fields', () => {
    const q = parseTdxQuote(v5());
    expect(q.bodyType).toBe(3);
    expect(hex(q.body.teeTcbSvn2)).toBe(expected.quotes['quote_v5_sample.dat']?.body.tee_tcb_svn2);
  });

  it('v4 with collateral at 2023-07-01: signatures, windows, FMSPC, QE identity and both CRLs pass; the TCB level does not match (README caveat)', async () => {
    const v = await verifyTdxQuote(v4(), {
      root: root(),
      at: T('2023-07-01T00:00:00Z'),
      collateral: await collateral(),
    });
    for (const name of [
      'tcb-info-signature',
      'tcb-info-validity',
      'tcb-info-fmspc',
      'tdx-module',
      'qe-identity-signature',
      'qe-identity-validity',
      'qe-identity',
      'root-crl',
      'pck-crl',
    ])
      expect(v.checks.find((c) => c.name === name)?.ok, name).toBe(true);
    expect(detail(v, 'qe-identity')).toBe('QE ISVSVN 4: UpToDate');
    expect(detail(v, 'pck-crl')).toContain('not among 44 revoked serials');
    // TEE_TCB_SVN 3.0.4 is below every TDX TCB level (3.0.5): Intel reports "TCB not supported".
    expect(failed(v)).toEqual(['tcb-level']);
    expect(detail(v, 'tcb-level')).toContain('TCB not supported');
  });

  it('accepts the v4 quote with its collateral and revocation checks at 2023-07-01 under upstream verify semantics (TCB level reported, not enforced)', async () => {
    const v = await verifyTdxQuote(v4(), {
      root: root(),
      at: T('2023-07-01T00:00:00Z'),
      collateral: await collateral(),
      policy: { enforceTcbLevel: false },
    });
    expect(failed(v)).toEqual([]);
    expect(v.accepted).toBe(true);
    expect(detail(v, 'tcb-level')).toMatch(/^not enforced by policy: .*TCB not supported/);
  });

  it('v5 collateral at 2026-02-03: the TCB signing cert expired 2025-05-21, before the TCB info was issued', async () => {
    const c = await loadTdxCollateralDir(`${VECTORS}/go-tdx-guest/testdata`, '90c06f000000');
    const v = await verifyTdxQuote(v5(), { root: root(), at: T('2026-02-03T00:00:00Z'), collateral: c });
    expect(detail(v, 'tcb-info-signature')).toContain(
      'Intel SGX TCB Signing (valid 2018-05-21T10:50:10.000Z … 2025-05-21T10:50:10.000Z) is not valid',
    );
    expect(v.checks.find((c2) => c2.name === 'tcb-level')?.ok).toBe(true);
    expect(v.accepted).toBe(false);
  });

  describe('rejects, each for its own reason', () => {
    const at = T('2023-07-01T00:00:00Z');
    const mutate = (offset: number, value?: number) => {
      const q = v4();
      q[offset] = value ?? (q[offset] as number) ^ 0x01;
      return q;
    };

    it('0x00 → 3: format not supported', async () => {
      const v = await verifyTdxQuote(mutate(0, 3), { root: root(), at });
      expect(failed(v)).toEqual(['quote-format']);
      expect(detail(v, 'quote-format')).toContain('format not supported: version 3');
    });

    it('0x278 → 0x10 (size 4299 → 4112): signature data size too small', async () => {
      const v = await verifyTdxQuote(mutate(0x278, 0x10), { root: root(), at });
      expect(failed(v)).toEqual(['quote-format']);
      expect(detail(v, 'quote-format')).toContain('signature data size 4112 is too small');
    });

    it.each([
      ['0x1e', 0x1e],
      ['0x3c', 0x3c],
    ])('byte %s changed: unable to verify message digest', async (_label, offset) => {
      const v = await verifyTdxQuote(mutate(offset), { root: root(), at });
      expect(failed(v)).toContain('quote-signature');
      expect(detail(v, 'quote-signature')).toContain('unable to verify message digest');
    });

    it.each([
      ['0x1343 (PCK chain PEM end)', 0x1343, 'PCK chain has 2 certificates, want 3'],
      ['0x1329 (root)', 0x1329, 'chain root "Intel SGX Root CA" is not the pinned Intel SGX root'],
      ['0xf5f (intermediate)', 0xf5f, 'Intel SGX PCK Platform CA is not signed by the root'],
      ['0xb77 (leaf)', 0xb77, 'Intel SGX PCK Certificate is not signed by Intel SGX PCK Platform CA'],
    ])('byte %s changed: PCK chain error', async (_label, offset, reason) => {
      const v = await verifyTdxQuote(mutate(offset), { root: root(), at });
      expect(failed(v)).toEqual(['pck-chain']);
      expect(detail(v, 'pck-chain')).toBe(reason);
    });

    it('at 2053-07-01: the PCK leaf (until 2029-09-20) has expired, and so has the TCB info', async () => {
      const v = await verifyTdxQuote(v4(), {
        root: root(),
        at: T('2053-07-01T00:00:00Z'),
        collateral: await collateral(),
      });
      expect(detail(v, 'certificate-validity')).toContain('2029-09-20T13:20:31.000Z');
      expect(detail(v, 'tcb-info-validity')).toContain('tcbInfo has expired');
    });

    it('collateral at 2023-07-09: the QE identity (next update 2023-07-08) and PCK CRL have expired', async () => {
      const v = await verifyTdxQuote(v4(), {
        root: root(),
        at: T('2023-07-09T00:00:00Z'),
        collateral: await collateral(),
      });
      expect(failed(v)).toEqual(['tcb-level', 'qe-identity-validity', 'pck-crl']);
    });

    const withCollateral = async (edit: (c: TdxCollateral) => void) => {
      const c = await collateral();
      edit(c);
      return verifyTdxQuote(v4(), { root: root(), at, collateral: c });
    };

    it('one byte of the TCB info changed: signature fails', async () => {
      const v = await withCollateral((c) => {
        const t = Buffer.from(c.tcbInfo);
        const i = t.indexOf('"tcbEvaluationDataNumber":15');
        t[i + 26] = 0x36;
        c.tcbInfo = t;
      });
      expect(detail(v, 'tcb-info-signature')).toBe('TCB info signature does not verify');
    });

    it('one byte of the QE identity changed: signature fails', async () => {
      const v = await withCollateral((c) => {
        const t = Buffer.from(c.qeIdentity);
        const i = t.indexOf('"isvprodid":2');
        t[i + 12] = 0x33;
        c.qeIdentity = t;
      });
      expect(failed(v)).toContain('qe-identity-signature');
    });

    it('TCB info of another FMSPC (v5 TCB info for the v4 quote)', async () => {
      const v = await withCollateral((c) => {
        c.tcbInfo = vec('go-tdx-guest/testdata/sample_tcbinfo_response_v5');
      });
      expect(detail(v, 'tcb-info-fmspc')).toContain('TCB info is for FMSPC 90c06f000000');
    });

    it('PCK CRL with a changed signature byte', async () => {
      const v = await withCollateral((c) => {
        const t = Buffer.from(c.pckCrl);
        t[t.length - 10] = (t[t.length - 10] as number) ^ 1;
        c.pckCrl = t;
      });
      expect(detail(v, 'pck-crl')).toBe('PCK CRL signature does not verify');
    });

    it('root CRL checked against another root', async () => {
      const v = await withCollateral((c) => {
        c.rootCrl = c.pckCrl;
      });
      expect(failed(v)).toContain('root-crl');
    });

    it('a root that is not Intel SGX Root CA', async () => {
      const amdArk = vec('constellation/trust-anchors/amd-ark-milan.pem');
      const v = await verifyTdxQuote(v4(), { root: amdArk, at });
      expect(detail(v, 'pck-chain')).toContain('is not the pinned Intel SGX root');
    });

    it('report data differs from the expected value', async () => {
      const v = await verifyTdxQuote(ccel(), {
        root: root(),
        at: T('2026-11-21T00:00:00Z'),
        policy: { reportData: Uint8Array.of(1) },
      });
      expect(failed(v)).toEqual(['report-data']);
    });

    it('policy: MRSEAM not accepted, XFAM differs, QE vendor differs', async () => {
      const v = await verifyTdxQuote(v4(), {
        root: root(),
        at,
        policy: { mrSeam: [new Uint8Array(48)], xfam: new Uint8Array(8), qeVendorId: new Uint8Array(16) },
      });
      expect(failed(v)).toEqual(['qe-vendor-id', 'mr-seam', 'xfam']);
    });
  });
});
