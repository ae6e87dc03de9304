/**
 * TPM 2.0 structure parsing: real GCE structures and soft-TPM ones parse to the documented fields;
 * any truncation or mutation either parses or fails with an AttestationError naming the structure's
 * check — never another exception (property-based with fast-check).
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeAttestationPb } from '../../../src/adapters/attestation/shared/vtpm-document.js';
import { parseTpmtPublic } from '../../../src/adapters/tpm/tpm2-public.js';
import { parseTpmsAttest, parseTpmtSignature, TpmAlg } from '../../../src/adapters/tpm/tpm2-wire.js';
import { isAttestationError } from '../../../src/ports/errors.js';
import { SHA256, SoftTpm } from '../../support/soft-tpm.js';

const vectors = resolve(import.meta.dirname, '../../../../shared/testvectors/go-tpm-tools');
const gce = decodeAttestationPb(readFileSync(resolve(vectors, 'attestations/gce-cos-85-nonce9009.pb')));
const gceQuote = gce.quotes.find((q) => q.pcrHashAlg === TpmAlg.SHA256);
if (!gceQuote) throw new Error('no sha256 quote in the vector');
const ecc = SoftTpm.create({ key: 'ecc' });
const eccQuote = ecc.quoteBank(Buffer.from('nonce'), SHA256, [0, 1, 2]);

describe('TPM structure parsing', () => {
  it('parses the real GCE quote: magic, type, extraData 9009, all 24 SHA256 PCRs', () => {
    const a = parseTpmsAttest(gceQuote.quote);
    expect(a.magic).toBe(0xff544347);
    expect(a.type).toBe(0x8018);
    expect(Buffer.from(a.extraData).toString('hex')).toBe('9009');
    expect(a.resetCount).toBe(10);
    expect(a.firmwareVersion).toBe(0x2016051100162800n);
    expect(a.pcrSelect).toEqual([{ hashAlg: TpmAlg.SHA256, pcrs: [...Array(24).keys()] }]);
    expect(a.pcrDigest).toHaveLength(32);
    const s = parseTpmtSignature(gceQuote.rawSig);
    expect([s.sigAlg, s.hashAlg, s.signature.length]).toEqual([TpmAlg.RSASSA, TpmAlg.SHA256, 256]);
  });

  it('parses an ECC P-256 AK and its ECDSA signature', () => {
    const ak = parseTpmtPublic(ecc.akPublic);
    expect([ak.type, ak.curveId, ak.keyBits]).toEqual([TpmAlg.ECC, 0x0003, 256]);
    expect(ak.publicKey.asymmetricKeyDetails?.namedCurve).toBe('prime256v1');
    const s = parseTpmtSignature(eccQuote.rawSig);
    expect([s.sigAlg, s.r?.length, s.s?.length]).toEqual([TpmAlg.ECDSA, 32, 32]);
    expect(parseTpmsAttest(eccQuote.quote).pcrSelect).toEqual([{ hashAlg: SHA256, pcrs: [0, 1, 2] }]);
  });

  it('rejects a non-quote attestation type and a wrong magic', () => {
    const certify = Buffer.from(gceQuote.quote);
    certify.writeUInt16BE(0x8017, 4);
    expect(() => parseTpmsAttest(certify)).toThrow(/not TPM_ST_ATTEST_QUOTE/);
    const magic = Buffer.from(gceQuote.quote);
    magic[0] = 0;
    expect(() => parseTpmsAttest(magic)).toThrow(/not TPM_GENERATED_VALUE/);
    expect(() => parseTpmsAttest(Buffer.concat([gceQuote.quote, Buffer.from([0])]))).toThrow(/trailing/);
  });

  it('rejects signature schemes other than RSASSA, RSAPSS and ECDSA', () => {
    const hmac = Buffer.from(gceQuote.rawSig);
    hmac.writeUInt16BE(TpmAlg.HMAC, 0);
    expect(() => parseTpmtSignature(hmac)).toThrow(/unsupported signature scheme HMAC/);
  });

  const structures: Array<[string, (b: Uint8Array) => unknown, Uint8Array, string]> = [
    ['TPMT_PUBLIC (RSA)', parseTpmtPublic, gce.akPub, 'ak-public-format'],
    ['TPMT_PUBLIC (ECC)', parseTpmtPublic, ecc.akPublic, 'ak-public-format'],
    ['TPMS_ATTEST', parseTpmsAttest, gceQuote.quote, 'quote-format'],
    ['TPMT_SIGNATURE (RSA)', parseTpmtSignature, gceQuote.rawSig, 'signature-format'],
    ['TPMT_SIGNATURE (ECDSA)', parseTpmtSignature, eccQuote.rawSig, 'signature-format'],
  ];

  it.each(structures)('%s: every truncation fails with a named check', (_n, parse, raw, check) => {
    for (let cut = 0; cut < raw.length; cut++) {
      try {
        parse(raw.subarray(0, cut));
        throw new Error(`parsed a copy cut at ${cut}`);
      } catch (err) {
        expect(isAttestationError(err) && err.check === check, String(err)).toBe(true);
      }
    }
  });

  it.each(structures)(
    '%s: random mutations parse or fail with a named check, never crash',
    (_n, parse, raw, check) => {
      fc.assert(
        fc.property(
          fc.array(fc.tuple(fc.nat(raw.length - 1), fc.integer({ min: 1, max: 255 })), {
            minLength: 1,
            maxLength: 4,
          }),
          (edits) => {
            const copy = Buffer.from(raw);
            for (const [i, x] of edits) copy[i] = (copy[i] as number) ^ x;
            try {
              parse(copy);
            } catch (err) {
              return isAttestationError(err) && err.check === check;
            }
            return true;
          },
        ),
        { numRuns: 300 },
      );
    },
  );

  it('arbitrary bytes never crash any parser', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (b) => {
        for (const [, parse, , check] of structures) {
          try {
            parse(b);
          } catch (err) {
            if (!(isAttestationError(err) && err.check === check)) return false;
          }
        }
        return true;
      }),
      { numRuns: 500 },
    );
  });
});
