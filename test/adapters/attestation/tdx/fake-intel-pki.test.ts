/**
 * Self-tests of the FAKE Intel SGX/TDX PKI (fake-intel-pki.ts): its quotes (v4, v5 with body types
 * 2 and 3) and collateral are accepted by the real verifyTdxQuote and the real qemu-tdx validator,
 * and each kind of damage a test would make is rejected by the check that should catch it.
 */
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadTdxCollateralDir } from '../../../../src/adapters/attestation/tdx/collateral.js';
import { pckExtensions } from '../../../../src/adapters/attestation/tdx/pck.js';
import { parseTdxQuote, tdxMeasurements } from '../../../../src/adapters/attestation/tdx/quote.js';
import { QemuTdxValidator } from '../../../../src/adapters/attestation/tdx/validators.js';
import { type TdxVerification, verifyTdxQuote } from '../../../../src/adapters/attestation/tdx/verify.js';
import { variantOid } from '../../../../src/app/registry/index.js';
import { isAttestationError, refusalReasonCode } from '../../../../src/ports/errors.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { useTmpDirs } from '../../../support/tmp.js';
import {
  createFakeIntelPki,
  DEFAULT_TEE_TCB_SVN,
  FAKE_INTEL_AT,
  type FakeIntelPki,
  fakeTcbLevel,
  flipByte,
  quoteSignatureOffset,
  type SignTdxQuoteOptions,
  signCollateral,
  signTdxQuote,
  writeCollateralDir,
} from './fake-intel-pki.js';

const tmp = useTmpDirs('confboot-fake-intel-');
const failed = (v: TdxVerification) => v.checks.filter((c) => !c.ok).map((c) => c.name);
const names = (v: TdxVerification) => v.checks.map((c) => c.name);
const detail = (v: TdxVerification, name: string) => v.checks.find((c) => c.name === name)?.detail ?? '';
const REPORT_DATA = createHash('sha512').update('fake intel report data').digest();

const CHAIN_CHECKS = [
  'quote-format',
  'qe-vendor-id',
  'quote-signature',
  'qe-report-data',
  'pck-chain',
  'certificate-validity',
  'qe-report-signature',
  'pck-extensions',
  'td-debug',
  'report-data',
];
const COLLATERAL_CHECKS = [
  'tcb-info-signature',
  'tcb-info-validity',
  'tcb-info-fmspc',
  'tdx-module',
  'tcb-level',
  'qe-identity-signature',
  'qe-identity-validity',
  'qe-identity',
  'root-crl',
  'pck-crl',
];

describe('FAKE Intel PKI: TDX quotes and collateral for verifyTdxQuote', () => {
  let pki: FakeIntelPki;
  let other: FakeIntelPki;
  let collateral: Awaited<ReturnType<typeof signCollateral>>;
  beforeAll(async () => {
    [pki, other] = await Promise.all([createFakeIntelPki(), createFakeIntelPki()]);
    collateral = await signCollateral(pki);
  });
  const verify = (quote: Uint8Array, extra: Partial<Parameters<typeof verifyTdxQuote>[1]> = {}) =>
    verifyTdxQuote(quote, {
      root: pki.rootPem,
      at: FAKE_INTEL_AT,
      policy: { reportData: REPORT_DATA },
      ...extra,
    });

  it('the PCK certificate carries the SGX extension exactly as pck.ts reads it', () => {
    const ext = pckExtensions(pki.certs.pck);
    expect(Buffer.from(ext.fmspc).toString('hex')).toBe('fa4e00906ed5');
    expect(Buffer.from(ext.pceId).toString('hex')).toBe('0000');
    expect(ext.sgxTcbComponents).toEqual([5, 5, 2, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0]);
    expect(ext.pceSvn).toBe(11);
    expect(ext).toEqual(pki.platform);
  });

  it('options set the FMSPC, SGX TCB components (incl. values ≥ 128) and PCESVN', async () => {
    const custom = await createFakeIntelPki({
      fmspc: '00806f050000',
      sgxTcbComponents: [200, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 300],
      pceSvn: 13,
    });
    const ext = pckExtensions(custom.certs.pck);
    expect(Buffer.from(ext.fmspc).toString('hex')).toBe('00806f050000');
    expect(ext.sgxTcbComponents).toEqual([200, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 300]);
    expect(ext.pceSvn).toBe(13);
  });

  const versions: [string, SignTdxQuoteOptions, number, number][] = [
    ['v4', { version: 4 }, 4, 2],
    ['v5 body type 3 (TDX 1.5)', { version: 5, bodyType: 3 }, 5, 3],
    ['v5 body type 2 (TDX 1.0)', { version: 5, bodyType: 2 }, 5, 2],
  ];

  it.each(versions)(
    'a %s quote is accepted with the chain only and binds its report data',
    async (_, opts, version, bodyType) => {
      const mrTd = new Uint8Array(48).fill(0x42);
      const quote = signTdxQuote(pki, { reportData: REPORT_DATA, mrTd }, opts);
      const v = await verify(quote);
      expect(failed(v)).toEqual([]);
      expect(names(v)).toEqual(CHAIN_CHECKS);
      expect(v.accepted).toBe(true);
      expect(v.quote?.version).toBe(version);
      expect(v.quote?.bodyType).toBe(bodyType);
      expect(Buffer.from(v.quote?.body.reportData ?? [])).toEqual(REPORT_DATA);
      expect(tdxMeasurements(parseTdxQuote(quote).body).get(0)).toEqual(mrTd);
      expect(v.quote?.trailingBytes).toBe(0);
    },
  );

  it.each(versions)('a %s quote is accepted with collateral: every check passes', async (_, opts) => {
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA }, opts), { collateral });
    expect(failed(v)).toEqual([]);
    expect(names(v)).toEqual([...CHAIN_CHECKS, ...COLLATERAL_CHECKS]);
    expect(detail(v, 'tcb-level')).toContain('UpToDate');
  });

  it('a short report data is zero-padded and matches the zero-padded policy value', async () => {
    const v = await verify(signTdxQuote(pki, { reportData: Buffer.from('abc') }), {
      policy: { reportData: Buffer.from('abc') },
    });
    expect(failed(v)).toEqual([]);
  });

  it('a different report data fails report-data only', async () => {
    const v = await verify(signTdxQuote(pki, { reportData: Buffer.alloc(64, 7) }));
    expect(failed(v)).toEqual(['report-data']);
  });

  it('one flipped byte of the quote signature fails quote-signature only', async () => {
    const quote = signTdxQuote(pki, { reportData: REPORT_DATA }, { version: 5 });
    const v = await verify(flipByte(quote, quoteSignatureOffset(quote) + 10));
    expect(failed(v)).toEqual(['quote-signature']);
  });

  it('one flipped byte of the signed body fails quote-signature only', async () => {
    const quote = signTdxQuote(pki, { reportData: REPORT_DATA });
    const v = await verify(flipByte(quote, 48 + 100), { policy: {} });
    expect(failed(v)).toEqual(['quote-signature']);
  });

  it("a quote under another fake PKI's root fails pck-chain", async () => {
    const v = await verify(signTdxQuote(other, { reportData: REPORT_DATA }));
    expect(failed(v)).toEqual(['pck-chain']);
    expect(detail(v, 'pck-chain')).toContain('is not the pinned Intel SGX root');
  });

  it('a QE report signed by another PCK key fails qe-report-signature', async () => {
    const v = await verify(
      signTdxQuote(other, { reportData: REPORT_DATA }, { pckChainPem: pki.pckChainPem }),
    );
    expect(failed(v)).toEqual(['qe-report-signature']);
  });

  it('a revoked PCK certificate fails pck-crl', async () => {
    const revoking = await signCollateral(pki, { revokedPckSerials: [pki.serials.pck] });
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA }), { collateral: revoking });
    expect(failed(v)).toEqual(['pck-crl']);
    expect(detail(v, 'pck-crl')).toContain('is revoked');
  });

  it('a revoked PCK Platform CA fails root-crl', async () => {
    const revoking = await signCollateral(pki, { revokedCaSerials: [pki.serials.intermediate] });
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA }), { collateral: revoking });
    expect(failed(v)).toEqual(['root-crl']);
  });

  it('a TEE_TCB_SVN below every TCB level fails tcb-level', async () => {
    const low = Uint8Array.from(DEFAULT_TEE_TCB_SVN);
    low[2] = 4;
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA, teeTcbSvn: low }), { collateral });
    expect(failed(v)).toEqual(['tcb-level']);
    expect(detail(v, 'tcb-level')).toContain('no TCB level matches');
  });

  it('a TEE_TCB_SVN that only meets an OutOfDate level fails tcb-level naming the status', async () => {
    const low = Uint8Array.of(2, 0, 5, ...new Array<number>(13).fill(0));
    const levels = [fakeTcbLevel(pki), fakeTcbLevel(pki, low, 'OutOfDate', '2024-01-01T00:00:00Z')];
    const c = await signCollateral(pki, { tcbLevels: levels });
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA, teeTcbSvn: low }), { collateral: c });
    expect(failed(v)).toEqual(['tcb-level']);
    expect(detail(v, 'tcb-level')).toContain('OutOfDate');
    // It names what to update, and by how much, against the newest level; the reason code says OutOfDate.
    expect(detail(v, 'tcb-level')).toMatch(
      /short of the \S+ level \(UpToDate\): .*TDX TCB component \d+ \d+ < \d+ \(by \d+\)/,
    );
    expect(refusalReasonCode('tcb-level', detail(v, 'tcb-level'))).toBe('tcb-out-of-date');
  });

  it('a TEE_TCB_SVN that only meets a Revoked level fails tcb-level with reason code tcb-revoked', async () => {
    const low = Uint8Array.of(2, 0, 5, ...new Array<number>(13).fill(0));
    const levels = [fakeTcbLevel(pki), fakeTcbLevel(pki, low, 'Revoked', '2024-01-01T00:00:00Z')];
    const c = await signCollateral(pki, { tcbLevels: levels });
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA, teeTcbSvn: low }), { collateral: c });
    expect(failed(v)).toEqual(['tcb-level']);
    expect(detail(v, 'tcb-level')).toContain('Revoked');
    expect(refusalReasonCode('tcb-level', detail(v, 'tcb-level'))).toBe('tcb-revoked');
  });

  it('a QE ISVSVN below the QE identity levels fails qe-identity', async () => {
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA }, { qeReport: { isvSvn: 3 } }), {
      collateral,
    });
    expect(failed(v)).toEqual(['qe-identity']);
  });

  it('collateral past its nextUpdate fails the validity checks and both CRLs', async () => {
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA }), {
      collateral,
      at: new Date(FAKE_INTEL_AT.getTime() + 40 * 86_400_000),
    });
    expect(failed(v)).toEqual(['tcb-info-validity', 'qe-identity-validity', 'root-crl', 'pck-crl']);
  });

  it("collateral signed by another fake PKI fails every signature the pinned root can't vouch for", async () => {
    const foreign = await signCollateral(other, { fmspc: pki.platform.fmspc });
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA }), { collateral: foreign });
    expect(failed(v)).toEqual(['tcb-info-signature', 'qe-identity-signature', 'root-crl', 'pck-crl']);
  });

  it('one changed byte in the signed TCB info fails tcb-info-signature', async () => {
    const text = Buffer.from(collateral.tcbInfo)
      .toString('utf8')
      .replace('"tcbEvaluationDataNumber":17', '"tcbEvaluationDataNumber":18');
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA }), {
      collateral: { ...collateral, tcbInfo: Buffer.from(text) },
    });
    expect(failed(v)).toEqual(['tcb-info-signature']);
  });

  it('collateral written with writeCollateralDir loads back with loadTdxCollateralDir and is accepted', async () => {
    const dir = tmp();
    await writeCollateralDir(dir, collateral);
    const loaded = await loadTdxCollateralDir(dir);
    const v = await verify(signTdxQuote(pki, { reportData: REPORT_DATA }, { version: 5 }), {
      collateral: loaded,
    });
    expect(failed(v)).toEqual([]);
    expect(names(v)).toEqual([...CHAIN_CHECKS, ...COLLATERAL_CHECKS]);
  });

  it('the real qemu-tdx validator accepts a fake quote over SHA256(userData ‖ nonce) with collateral, and rejects another nonce', async () => {
    const userData = Buffer.from('tls spki hash');
    const nonce = Buffer.alloc(32, 9);
    const quote = signTdxQuote(
      pki,
      { reportData: createHash('sha256').update(userData).update(nonce).digest() },
      { version: 5 },
    );
    const doc = Buffer.from(
      JSON.stringify({
        RawQuote: Buffer.from(quote).toString('base64'),
        UserData: userData.toString('base64'),
      }),
    );
    const fmspcs: string[] = [];
    const validator = new QemuTdxValidator({
      oid: variantOid('qemu-tdx'),
      root: pki.rootPem,
      measurements: { compare: () => [] },
      clock: new FakeClock(FAKE_INTEL_AT),
      getCollateral: async (fmspc) => {
        fmspcs.push(fmspc);
        return collateral;
      },
    });
    const r = await validator.validate(doc, nonce);
    expect(Buffer.from(r.userData)).toEqual(userData);
    expect(r.checks.filter((c) => !c.ok)).toEqual([]);
    expect(r.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining(['report-data', 'tcb-level', 'pck-crl']),
    );
    expect(fmspcs).toEqual(['fa4e00906ed5']);
    const err = await validator.validate(doc, Buffer.alloc(32, 8)).catch((e: unknown) => e);
    expect(isAttestationError(err) && err.check).toBe('report-data');
  });
});
