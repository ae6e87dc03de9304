/**
 * A minimal DER reader for the few ASN.1 structures the SEV-SNP and TDX validators look into:
 * AMD's VCEK/VLEK extensions and Intel's SGX PCK extension. Certificates themselves are parsed and
 * verified by node:crypto; this only walks TLVs.
 */

/** One DER tag-length-value. `content` is a view into the input. */
export interface Tlv {
  /** The full identifier octet (class, constructed bit and tag number). */
  tag: number;
  /** The content octets. */
  content: Uint8Array;
  /** The offset just past this TLV in the input. */
  end: number;
}

/** Reads the TLV at `offset` of `buf`; throws on truncation or unsupported length forms. */
export function readTlv(buf: Uint8Array, offset = 0): Tlv {
  if (offset + 2 > buf.length) throw new Error('DER: truncated header');
  const tag = buf[offset] as number;
  if ((tag & 0x1f) === 0x1f) throw new Error('DER: multi-byte tags are not supported');
  let len = buf[offset + 1] as number;
  let pos = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4) throw new Error('DER: unsupported length form');
    if (pos + n > buf.length) throw new Error('DER: truncated length');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + (buf[pos + i] as number);
    pos += n;
  }
  if (pos + len > buf.length) throw new Error('DER: truncated content');
  return { tag, content: buf.subarray(pos, pos + len), end: pos + len };
}

/** Reads every TLV inside a constructed value's content. */
export function readChildren(content: Uint8Array): Tlv[] {
  const out: Tlv[] = [];
  let off = 0;
  while (off < content.length) {
    const t = readTlv(content, off);
    out.push(t);
    off = t.end;
  }
  return out;
}

/**
 * Decodes an OBJECT IDENTIFIER's content octets to dotted form. Every subidentifier, the first
 * (which packs the first two arcs as 40·x + y) included, is base 128 over as many octets as it needs,
 * so `2.999` is `88 37`. A last octet with the continuation bit set is a truncated OID.
 */
export function decodeOid(content: Uint8Array): string {
  if (content.length === 0) throw new Error('DER: empty OID');
  if (((content[content.length - 1] as number) & 0x80) !== 0) throw new Error('DER: truncated OID');
  const ids: number[] = [];
  let v = 0;
  for (const b of content) {
    v = v * 128 + (b & 0x7f);
    if (!(b & 0x80)) {
      ids.push(v);
      v = 0;
    }
  }
  const first = ids[0] as number;
  const x = Math.min(2, Math.floor(first / 40));
  return [x, first - x * 40, ...ids.slice(1)].join('.');
}

/** Decodes a non-negative INTEGER's content octets that fits in a JS number. */
export function decodeSmallInt(content: Uint8Array): number {
  if (content.length === 0 || content.length > 6) throw new Error('DER: integer out of range');
  if ((content[0] as number) & 0x80) throw new Error('DER: negative integer');
  let v = 0;
  for (const b of content) v = v * 256 + b;
  return v;
}

/** DER tag numbers used here. */
export const TAG = {
  INTEGER: 0x02,
  OCTET_STRING: 0x04,
  OID: 0x06,
  ENUMERATED: 0x0a,
  UTF8_STRING: 0x0c,
  IA5_STRING: 0x16,
  SEQUENCE: 0x30,
} as const;

/**
 * Returns the extensions of a DER X.509 certificate as OID → extnValue octets (the content of the
 * OCTET STRING). Throws when the certificate is not well-formed enough to find them.
 */
export function certificateExtensions(certDer: Uint8Array): Map<string, Uint8Array> {
  const cert = readTlv(certDer);
  if (cert.tag !== TAG.SEQUENCE) throw new Error('DER: certificate is not a SEQUENCE');
  const [tbs] = readChildren(cert.content);
  if (tbs === undefined || tbs.tag !== TAG.SEQUENCE) throw new Error('DER: missing tbsCertificate');
  const out = new Map<string, Uint8Array>();
  for (const field of readChildren(tbs.content)) {
    if (field.tag !== 0xa3) continue;
    const seq = readTlv(field.content);
    for (const ext of readChildren(seq.content)) {
      const parts = readChildren(ext.content);
      const oid = parts[0];
      const value = parts[parts.length - 1];
      if (oid?.tag !== TAG.OID || value?.tag !== TAG.OCTET_STRING)
        throw new Error('DER: malformed extension');
      out.set(decodeOid(oid.content), value.content);
    }
  }
  return out;
}
