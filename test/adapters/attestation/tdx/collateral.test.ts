/**
 * Intel's signed collateral JSON and the collateral directory, on REAL go-tdx-guest collateral
 * (../shared/testvectors): parseSignedJson returns the exact bytes Intel signed (the signature
 * verifies over them with the TCB signing certificate, independently of confboot's verifier), the
 * parsed object and the signature; a changed signature field, a missing key or a bad signature is
 * refused; loadTdxCollateralDir picks the TCB info of the asked FMSPC and names what is missing.
 */
import { verify as verifySignature, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  loadTdxCollateralDir,
  parseSignedJson,
  type QeIdentity,
  type TdxTcbInfo,
} from '../../../../src/adapters/attestation/tdx/collateral.js';
import { describeVectors, VECTORS, vec } from '../snp/vectors.js';

const DIR = `${VECTORS}/go-tdx-guest/testdata`;
const empty = mkdtempSync(join(tmpdir(), 'confboot-collateral-'));
afterAll(() => rmSync(empty, { recursive: true, force: true }));

describeVectors('TDX collateral (go-tdx-guest)', () => {
  const signer = () => {
    const pem = vec('go-tdx-guest/testdata/tcbinfo_issuer_chain.pem').toString('utf8');
    return new X509Certificate(pem.slice(0, pem.indexOf('-----END CERTIFICATE-----') + 25));
  };

  describe('parseSignedJson', () => {
    it.each(['sample_tcbInfo_response', 'sample_tcbinfo_response_v5'])(
      'returns the signed bytes of %s, over which Intel’s signature verifies',
      (file) => {
        const signed = parseSignedJson<TdxTcbInfo>(vec(`go-tdx-guest/testdata/${file}`), 'tcbInfo');
        expect(signed.signature).toHaveLength(64);
        expect(JSON.parse(Buffer.from(signed.signedBytes).toString('utf8'))).toEqual(signed.value);
        expect(signed.value.id).toBe('TDX');
        expect(
          verifySignature(
            'sha256',
            signed.signedBytes,
            { key: signer().publicKey, dsaEncoding: 'ieee-p1363' },
            signed.signature,
          ),
        ).toBe(true);
      },
    );

    it('reads the QE identity under enclaveIdentity', () => {
      const qe = parseSignedJson<QeIdentity>(
        vec('go-tdx-guest/testdata/sample_qeIdentity_response'),
        'enclaveIdentity',
      );
      expect(qe.value.id).toBe('TD_QE');
    });

    it.each([
      [
        'a short signature',
        (t: string) => t.replace(/"signature":"[0-9a-f]+"/, '"signature":"abcd"'),
        'signature is not 64 bytes of hex',
      ],
      ['no tcbInfo object', (t: string) => t.replace('"tcbInfo"', '"tcbInfoX"'), 'tcbInfo'],
    ])('refuses %s', (_n, change, message) => {
      const text = change(vec('go-tdx-guest/testdata/sample_tcbInfo_response').toString('utf8'));
      expect(() => parseSignedJson(Buffer.from(text), 'tcbInfo')).toThrow(message);
    });
  });

  describe('loadTdxCollateralDir', () => {
    it.each([
      ['50806f000000', '50806f000000'],
      ['90C06F000000', '90c06f000000'],
      [undefined, '50806f000000'],
    ])('picks the TCB info of FMSPC %s', async (fmspc, picked) => {
      const c = await loadTdxCollateralDir(DIR, fmspc);
      expect(parseSignedJson<TdxTcbInfo>(c.tcbInfo, 'tcbInfo').value.fmspc).toBe(picked);
      expect(c.tcbInfoIssuerChain.length).toBeGreaterThanOrEqual(2);
      expect(c.pckCrl.length).toBeGreaterThan(0);
      expect(c.rootCrl.length).toBeGreaterThan(0);
    });

    it('names what a directory lacks', async () => {
      await expect(loadTdxCollateralDir(empty)).rejects.toThrow(
        `collateral directory ${empty} has no TCB info`,
      );
    });
  });
});
