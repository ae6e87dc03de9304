/** The minimal DER reader on hand-written TLVs and on the REAL VCEK certificate of go-sev-guest. */
import { describe, expect, it } from 'vitest';
import {
  certificateExtensions,
  decodeOid,
  decodeSmallInt,
  readChildren,
  readTlv,
  TAG,
} from '../../../../src/adapters/attestation/shared/der.js';
import { describeVectors, vec } from '../snp/vectors.js';

const b = (hex: string) => Buffer.from(hex.replace(/ /g, ''), 'hex');

describe('readTlv and readChildren', () => {
  it('reads short and long lengths and the offset past the value', () => {
    expect(readTlv(b('04 03 616263'))).toMatchObject({ tag: TAG.OCTET_STRING, end: 5 });
    expect(Buffer.from(readTlv(b('04 03 616263')).content).toString()).toBe('abc');
    const long = Buffer.concat([b('04 81 80'), Buffer.alloc(0x80, 1)]);
    expect(readTlv(long).content).toHaveLength(0x80);
    expect(readTlv(b('ff 02 01 01 05'), 2)).toMatchObject({ tag: 0x01, end: 5 });
    const seq = readTlv(b('30 06 02 01 05 02 01 07'));
    expect(readChildren(seq.content).map((t) => [t.tag, decodeSmallInt(t.content)])).toEqual([
      [TAG.INTEGER, 5],
      [TAG.INTEGER, 7],
    ]);
  });

  it.each([
    ['an empty input', '', 'DER: truncated header'],
    ['a multi-byte tag', '1f 01 00', 'DER: multi-byte tags are not supported'],
    ['an indefinite length', '30 80 0000', 'DER: unsupported length form'],
    ['a five-byte length', '04 85 0000000001 00', 'DER: unsupported length form'],
    ['a cut length', '04 82 01', 'DER: truncated length'],
    ['a cut value', '04 05 6162', 'DER: truncated content'],
  ])('refuses %s', (_n, hex, message) => {
    expect(() => readTlv(b(hex))).toThrow(message);
  });
});

describe('decodeOid and decodeSmallInt', () => {
  it('decodes OIDs with multi-byte arcs', () => {
    expect(decodeOid(b('2a864886f70d010101'))).toBe('1.2.840.113549.1.1.1');
    expect(decodeOid(b('2b060104019c78010103'))).toBe('1.3.6.1.4.1.3704.1.1.3');
    expect(() => decodeOid(new Uint8Array())).toThrow('DER: empty OID');
    // A first subidentifier over two octets (X.690 8.19: 2.999 is 40·2 + 999 = 1079 = 0x88 0x37).
    expect(decodeOid(b('8837'))).toBe('2.999');
    expect(decodeOid(b('883703'))).toBe('2.999.3');
    expect(decodeOid(b('7f'))).toBe('2.47');
    expect(() => decodeOid(b('2a86'))).toThrow('DER: truncated OID');
  });

  it('decodes small non-negative integers and refuses others', () => {
    expect(decodeSmallInt(b('00ff'))).toBe(255);
    expect(decodeSmallInt(b('7fffffffffff'))).toBe(0x7fffffffffff);
    expect(() => decodeSmallInt(b('80'))).toThrow('DER: negative integer');
    expect(() => decodeSmallInt(b('01020304050607'))).toThrow('DER: integer out of range');
    expect(() => decodeSmallInt(new Uint8Array())).toThrow('DER: integer out of range');
  });
});

describeVectors('certificateExtensions on the REAL VCEK', () => {
  const vcek = vec('go-sev-guest/verify-testdata/vcek.testcer');

  it("finds AMD's VCEK extensions: the product name and the TCB parts", () => {
    const ext = certificateExtensions(vcek);
    const product = readTlv(ext.get('1.3.6.1.4.1.3704.1.2') ?? new Uint8Array());
    expect([product.tag, Buffer.from(product.content).toString()]).toEqual([TAG.IA5_STRING, 'Milan-B0']);
    const ucode = readTlv(ext.get('1.3.6.1.4.1.3704.1.3.8') ?? new Uint8Array());
    expect([ucode.tag, decodeSmallInt(ucode.content)]).toEqual([TAG.INTEGER, 0x44]);
    for (const part of [1, 2, 3, 4, 5, 6, 7, 8]) expect(ext.has(`1.3.6.1.4.1.3704.1.3.${part}`)).toBe(true);
  });

  it('refuses what is not a certificate', () => {
    expect(() => certificateExtensions(b('02 01 05'))).toThrow('DER: certificate is not a SEQUENCE');
    expect(() => certificateExtensions(b('30 03 02 01 05'))).toThrow('DER: missing tbsCertificate');
    expect(() => certificateExtensions(vcek.subarray(0, 100))).toThrow(/^DER: truncated/);
  });
});
