/** Builds TPMT_PUBLIC structures for SNP/TDX validator tests. */

/** An RSA TPMT_PUBLIC (RSASSA/SHA-256, exponent 0 = 65537) with `modulus`. */
export function rsaTpmtPublic(modulus: Uint8Array): Uint8Array {
  const head = Buffer.alloc(2 + 2 + 4 + 2 + 2 + 2 + 2 + 2 + 4 + 2);
  let o = 0;
  o = head.writeUInt16BE(0x0001, o);
  o = head.writeUInt16BE(0x000b, o);
  o = head.writeUInt32BE(0x00050072, o);
  o = head.writeUInt16BE(0, o);
  o = head.writeUInt16BE(0x0010, o);
  o = head.writeUInt16BE(0x0014, o);
  o = head.writeUInt16BE(0x000b, o);
  o = head.writeUInt16BE(modulus.length * 8, o);
  o = head.writeUInt32BE(0, o);
  head.writeUInt16BE(modulus.length, o);
  return Buffer.concat([head, modulus]);
}
