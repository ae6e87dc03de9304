/**
 * Matching a TDX quote's TCB against Intel's TCB info, on REAL go-tdx-guest quotes and TCB info
 * (../shared/testvectors): the v4 quote matches no level of its TCB info (TCB not supported, with
 * the shortfall per component) until the newest level's SVNs are zeroed (upstream's
 * TestVerifyUsingTcbInfoV4); the v5 quote matches its v5 TCB info through TDX module identity
 * TDX_01, and a TCB info without that identity, or with another MRSIGNERSEAM, matches nothing.
 */
import { expect, it } from 'vitest';
import { loadCertificates } from '../../../../src/adapters/attestation/shared/certs.js';
import { parseSignedJson, type TdxTcbInfo } from '../../../../src/adapters/attestation/tdx/collateral.js';
import { pckExtensions } from '../../../../src/adapters/attestation/tdx/pck.js';
import { parseTdxQuote } from '../../../../src/adapters/attestation/tdx/quote.js';
import { evaluateTdxTcbLevel, tdxShortfall } from '../../../../src/adapters/attestation/tdx/tcb-level.js';
import { describeVectors, vec } from '../snp/vectors.js';

describeVectors('TDX TCB levels (go-tdx-guest)', () => {
  const v4 = () => Buffer.from(vec('go-tdx-guest/testdata/tdx_prod_quote_SPR_E4.dat'));
  const v5 = () => Buffer.from(vec('go-tdx-guest/testdata/quote_v5_sample.dat'));

  it('v4: no level matches; the detail names the shortfall against the newest level', () => {
    const q = parseTdxQuote(v4());
    const pck = pckExtensions(loadCertificates(q.pckChainPem)[0] as never);
    const info = parseSignedJson<TdxTcbInfo>(
      vec('go-tdx-guest/testdata/sample_tcbInfo_response'),
      'tcbInfo',
    ).value;
    const m = evaluateTdxTcbLevel(info, q.body, pck);
    expect(m.status).toBeUndefined();
    expect(m.detail).toMatch(
      /^no TCB level matches: TEE_TCB_SVN .* is below every level \(TCB not supported\)/,
    );
    const short = tdxShortfall(info, q.body, pck);
    expect(short).toMatch(/\(by \d+\)/);
    expect(m.detail.endsWith(short)).toBe(true);
  });

  it('TCB-level matching succeeds once tcbLevels[0] SVNs are zeroed (upstream TestVerifyUsingTcbInfoV4)', async () => {
    const q = parseTdxQuote(v4());
    const pck = pckExtensions(loadCertificates(q.pckChainPem)[0] as never);
    const info = parseSignedJson<TdxTcbInfo>(
      vec('go-tdx-guest/testdata/sample_tcbInfo_response'),
      'tcbInfo',
    ).value;
    expect(evaluateTdxTcbLevel(info, q.body, pck).status).toBeUndefined();
    const level0 = info.tcbLevels[0] as TdxTcbInfo['tcbLevels'][number];
    for (const c of [...level0.tcb.sgxtcbcomponents, ...level0.tcb.tdxtcbcomponents]) c.svn = 0;
    level0.tcb.pcesvn = 0;
    expect(evaluateTdxTcbLevel(info, q.body, pck)).toMatchObject({ status: 'UpToDate' });
  });

  it('v5 quote matches the unmodified v5 TCB info (TDX module identity TDX_01)', () => {
    const q = parseTdxQuote(v5());
    const pck = pckExtensions(loadCertificates(q.pckChainPem)[0] as never);
    const info = parseSignedJson<TdxTcbInfo>(
      vec('go-tdx-guest/testdata/sample_tcbinfo_response_v5'),
      'tcbInfo',
    ).value;
    const m = evaluateTdxTcbLevel(info, q.body, pck);
    expect(m.status).toBe('UpToDate');
    expect(m.detail).toContain('TDX module UpToDate');
  });

  it('v5: a TCB info without the quote’s TDX module identity, or with another MRSIGNERSEAM, matches nothing', () => {
    const q = parseTdxQuote(v5());
    const pck = pckExtensions(loadCertificates(q.pckChainPem)[0] as never);
    const load = () =>
      parseSignedJson<TdxTcbInfo>(vec('go-tdx-guest/testdata/sample_tcbinfo_response_v5'), 'tcbInfo').value;
    const noIdentity = load();
    for (const m of noIdentity.tdxModuleIdentities ?? []) m.id = 'TDX_7F';
    expect(evaluateTdxTcbLevel(noIdentity, q.body, pck)).toEqual({
      status: undefined,
      detail: 'TCB info has no TDX module identity TDX_01',
    });
    const otherSigner = load();
    for (const m of otherSigner.tdxModuleIdentities ?? []) m.mrsigner = 'ab'.repeat(48);
    expect(evaluateTdxTcbLevel(otherSigner, q.body, pck)).toEqual({
      status: undefined,
      detail: 'MRSIGNERSEAM differs from TDX module identity TDX_01',
    });
  });
});
