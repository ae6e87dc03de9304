/**
 * parseTdxQuote on the REAL go-tdx-guest quotes (v4 and v5) in ../shared/testvectors, field by field
 * against go-tdx-guest/expected.json (decoded there independently), plus malformed headers and cuts.
 */
import { X509Certificate } from 'node:crypto';
import { expect, it } from 'vitest';
import { parseTdxQuote, tdxMeasurements } from '../../../../src/adapters/attestation/tdx/quote.js';
import { describeVectors, HAVE_VECTORS, vec } from '../snp/vectors.js';

interface ExpectedQuote {
  version: number;
  att_key_type: number;
  tee_type: string;
  qe_svn: number;
  pce_svn: number;
  qe_vendor_id: string;
  user_data: string;
  body_type?: number;
  body: Record<string, string>;
  signed_data_size?: number;
  total_len?: number;
  trailing?: number;
  qe_auth_data?: string;
  qe_report?: { mrenclave: string; mrsigner: string; isvprodid: number; isvsvn: number; cpusvn: string };
  pck_chain?: { subject: string }[];
}

const expected: [string, ExpectedQuote][] = HAVE_VECTORS
  ? Object.entries(
      (
        JSON.parse(vec('go-tdx-guest/expected.json').toString('utf8')) as {
          quotes: Record<string, ExpectedQuote>;
        }
      ).quotes,
    )
  : [];
const quoteFile = (name: string) => vec(`go-tdx-guest/testdata/${name}`);
const hex = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b).toString('hex'));

describeVectors('parseTdxQuote on REAL quotes', () => {
  it('has v4 and v5 quotes to check', () => {
    expect(expected.map(([, q]) => q.version).sort()).toEqual(expect.arrayContaining([4, 5]));
  });

  it.each(expected)('%s decodes as expected', (file, want) => {
    const q = parseTdxQuote(quoteFile(file));
    expect([q.version, q.attestationKeyType, `0x${q.teeType.toString(16)}`, q.qeSvn, q.pceSvn]).toEqual([
      want.version,
      want.att_key_type,
      want.tee_type,
      want.qe_svn,
      want.pce_svn,
    ]);
    expect([hex(q.qeVendorId), hex(q.userData)]).toEqual([want.qe_vendor_id, want.user_data]);
    expect(q.bodyType).toBe(want.body_type ?? 2);
    const b = q.body;
    const got: Record<string, string | undefined> = {
      tee_tcb_svn: hex(b.teeTcbSvn),
      mr_seam: hex(b.mrSeam),
      mr_signer_seam: hex(b.mrSignerSeam),
      seam_attributes: hex(b.seamAttributes),
      td_attributes: hex(b.tdAttributes),
      xfam: hex(b.xfam),
      mr_td: hex(b.mrTd),
      mr_config_id: hex(b.mrConfigId),
      mr_owner: hex(b.mrOwner),
      mr_owner_config: hex(b.mrOwnerConfig),
      rtmr0: hex(b.rtmrs[0]),
      rtmr1: hex(b.rtmrs[1]),
      rtmr2: hex(b.rtmrs[2]),
      rtmr3: hex(b.rtmrs[3]),
      report_data: hex(b.reportData),
      ...(b.teeTcbSvn2 ? { tee_tcb_svn2: hex(b.teeTcbSvn2), mr_service_td: hex(b.mrServiceTd) } : {}),
    };
    expect(got).toEqual(want.body);
    const bodySize = (want.body_type ?? 2) === 3 ? 648 : 584;
    expect(q.signedBytes.length).toBe(48 + (want.version === 5 ? 6 : 0) + bodySize);
    if (want.trailing !== undefined) expect(q.trailingBytes).toBe(want.trailing);
    if (want.qe_auth_data !== undefined) expect(hex(q.qeAuthData)).toBe(want.qe_auth_data);
    if (want.qe_report !== undefined)
      expect([
        hex(q.qeReport.mrEnclave),
        hex(q.qeReport.mrSigner),
        q.qeReport.isvProdId,
        q.qeReport.isvSvn,
      ]).toEqual([
        want.qe_report.mrenclave,
        want.qe_report.mrsigner,
        want.qe_report.isvprodid,
        want.qe_report.isvsvn,
      ]);
    if (want.pck_chain !== undefined) {
      const certs = q.pckChainPem.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? [];
      expect(
        certs.map((c) => new X509Certificate(c).subject.split('\n').find((l) => l.startsWith('CN='))),
      ).toEqual(want.pck_chain.map((c) => c.subject));
    }
    expect([q.signature.length, q.attestationKey.length]).toEqual([64, 64]);
    const m = tdxMeasurements(b);
    expect([...m.keys()]).toEqual([0, 1, 2, 3, 4]);
    expect([hex(m.get(0)), hex(m.get(4))]).toEqual([want.body.mr_td, want.body.rtmr3]);
  });

  it('refuses a wrong version, key type or TEE type, and names the part a cut quote lacks', () => {
    const raw = quoteFile('tdx_prod_quote_SPR_E4.dat');
    const edit = (at: number, value: number, size: 2 | 4) => {
      const copy = Buffer.from(raw);
      if (size === 2) copy.writeUInt16LE(value, at);
      else copy.writeUInt32LE(value, at);
      return copy;
    };
    expect(() => parseTdxQuote(edit(0, 3, 2))).toThrow(
      'TDX quote format not supported: version 3 (want 4 or 5)',
    );
    expect(() => parseTdxQuote(edit(2, 3, 2))).toThrow(/attestation key type 3 not supported/);
    expect(() => parseTdxQuote(edit(4, 0, 4))).toThrow('TEE type 0x0 is not TDX (0x81)');
    expect(() => parseTdxQuote(raw.subarray(0, 40))).toThrow(
      /^TDX quote is truncated: header needs 48 bytes, have 40$/,
    );
    expect(() => parseTdxQuote(raw.subarray(0, 600))).toThrow(/^TDX quote is truncated: body needs/);
    // Cut inside the signature data: the declared size runs past the end.
    for (const cut of [700, 1000, 2000, 4000])
      expect(() => parseTdxQuote(raw.subarray(0, cut))).toThrow(
        /^TDX quote (is truncated|signature data size)/,
      );
    const badCert = Buffer.from(raw);
    badCert.writeUInt16LE(7, 48 + 584 + 4 + 64 + 64);
    expect(() => parseTdxQuote(badCert)).toThrow(
      'TDX quote certification data type 7 not supported (want 6, QE report)',
    );
  });
});
