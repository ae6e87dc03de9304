/**
 * Kubelet certificates assembled and signed directly (adapter layer, src/adapters/pki): the
 * TBSCertificate is built from @peculiar/asn1-x509 objects, most of them made once per CA (the
 * issuer name, the signature algorithm, the fixed extensions and the AuthorityKeyIdentifier),
 * encoded once with @peculiar/asn1-schema and signed synchronously with node:crypto; the outer
 * Certificate SEQUENCE is written around those bytes.
 *
 * @peculiar/x509's X509CertificateGenerator encodes the same TBSCertificate, byte for byte (the
 * test compares them), but on every call it re-parses each extension, both names and the key from
 * DER, signs through WebCrypto (a round trip through the thread pool) and parses the finished
 * certificate again; that was 1.5 ms of CPU per kubelet certificate, the largest single cost of a
 * join (bench/analysis.md).
 */
import { type KeyObject, randomBytes, sign } from 'node:crypto';
import type * as X509 from '@peculiar/x509';
import type { X509Module } from './x509-loader.js';

type Schema = typeof import('@peculiar/asn1-schema');
type AsnX509 = typeof import('@peculiar/asn1-x509');

/** A CommonJS module's exports by name, or under `default` (a bundler's code-split import). */
function named<T extends object>(imported: T, probe: string): T {
  return (probe in imported ? imported : (imported as unknown as { default: T }).default) as T;
}

let modules: Promise<{ schema: Schema; asn: AsnX509 }> | undefined;

/** @peculiar/asn1-schema and @peculiar/asn1-x509, imported once on first use. */
function asnModules(): Promise<{ schema: Schema; asn: AsnX509 }> {
  modules ??= (async () => ({
    schema: named(await import('@peculiar/asn1-schema'), 'AsnConvert'),
    asn: named(await import('@peculiar/asn1-x509'), 'TBSCertificate'),
  }))();
  return modules;
}

const OID_O = '2.5.4.10';
const OID_CN = '2.5.4.3';
const OID_SAN = '2.5.29.17';

/**
 * The extensions of upstream's kubelet certificate profile, in order: key usage digitalSignature and
 * keyEncipherment (critical), client and server auth, not a CA (critical). The CA adds its
 * AuthorityKeyIdentifier after them, and the signer the IP SANs.
 */
export function kubeletProfileExtensions(x509: X509Module): X509.Extension[] {
  return [
    new x509.KeyUsagesExtension(
      x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
      true,
    ),
    new x509.ExtendedKeyUsageExtension(
      [x509.ExtendedKeyUsage.clientAuth, x509.ExtendedKeyUsage.serverAuth],
      false,
    ),
    new x509.BasicConstraintsExtension(false, undefined, true),
  ];
}

/** What the CA contributes to every certificate it signs. */
export interface KubeletSignerOptions {
  /** The CA certificate (its subject is the issuer). */
  caCert: X509.X509Certificate;
  /** The CA's private key. */
  key: KeyObject;
  /** The WebCrypto form of the signature algorithm (ECDSA with a hash, or RSASSA-PKCS1-v1_5). */
  algorithm: { name: string; hash: string };
  /** Extensions every certificate carries, in order (the SAN is appended per certificate). */
  extensions: readonly X509.Extension[];
}

/** One certificate's own fields. */
export interface KubeletCertificateFields {
  /** The subject's organization and common name (two single-valued RDNs, in that order). */
  organization: string;
  commonName: string;
  /** IP SANs (none: no SAN extension). */
  ipAddresses: readonly string[];
  /** The subject's public key, SubjectPublicKeyInfo DER. */
  spki: ArrayBuffer;
  notBefore: Date;
  notAfter: Date;
  /** Serial number bytes (default: 16 random bytes, not all zero). */
  serial?: Uint8Array;
}

/** Signs kubelet certificates for one CA; made by {@link kubeletCertificateSigner}. */
export interface KubeletCertificateSigner {
  /** The DER certificate. */
  sign(fields: KubeletCertificateFields): Uint8Array;
}

/** A positive DER INTEGER's content octets for `bytes` (leading zeros dropped, a 0x00 before a high bit). */
function positiveInteger(bytes: Uint8Array): ArrayBuffer {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const body = bytes.subarray(start);
  const out = new Uint8Array(body.length + ((body[0] ?? 0) > 0x7f ? 1 : 0));
  out.set(body, out.length - body.length);
  return out.buffer;
}

function randomSerial(): Uint8Array {
  for (;;) {
    const bytes = randomBytes(16);
    if (bytes.some((b) => b !== 0)) return bytes;
  }
}

/** A DER tag and length for `length` content bytes (short form below 128, else long form). */
function derHeader(tag: number, length: number): Buffer {
  if (length < 0x80) return Buffer.from([tag, length]);
  const bytes: number[] = [];
  for (let n = length; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return Buffer.from([tag, 0x80 | bytes.length, ...bytes]);
}

const DER_SEQUENCE = 0x30;
const DER_BIT_STRING = 0x03;

/** The node:crypto digest name of a WebCrypto hash name (`SHA-256` → `sha256`). */
function digestName(hash: string): string {
  const name = { 'SHA-256': 'sha256', 'SHA-384': 'sha384', 'SHA-512': 'sha512' }[hash];
  if (name === undefined) throw new Error(`unsupported signature hash ${hash}`);
  return name;
}

/** Prepares the CA's parts once; the signer then builds each certificate from them. */
export async function kubeletCertificateSigner(
  x509: X509Module,
  options: KubeletSignerOptions,
): Promise<KubeletCertificateSigner> {
  const ecdsa = options.algorithm.name === 'ECDSA';
  if (!ecdsa && options.algorithm.name !== 'RSASSA-PKCS1-v1_5')
    throw new Error(`unsupported signature algorithm ${options.algorithm.name}`);
  const digest = digestName(options.algorithm.hash);
  const { schema, asn } = await asnModules();
  const { AsnConvert, OctetString } = schema;
  const issuer = AsnConvert.parse(options.caCert.subjectName.toArrayBuffer(), asn.Name);
  const signatureAlgorithm = new x509.AlgorithmProvider().toAsnAlgorithm(
    options.algorithm as unknown as Parameters<X509.AlgorithmProvider['toAsnAlgorithm']>[0],
  );
  const signatureAlgorithmDer = Buffer.from(AsnConvert.serialize(signatureAlgorithm));
  const fixed = options.extensions.map((e) => AsnConvert.parse(e.rawData, asn.Extension));
  // The encoding @peculiar/x509's Name picks: PrintableString when the value allows it, else UTF8String.
  const rdn = (type: string, value: string) =>
    new asn.RelativeDistinguishedName([
      new asn.AttributeTypeAndValue({
        type,
        value: new asn.AttributeValue(
          x509.Name.isPrintableString(value) ? { printableString: value } : { utf8String: value },
        ),
      }),
    ]);

  return {
    sign(fields) {
      const extensions = [...fixed];
      if (fields.ipAddresses.length > 0) {
        const names = new asn.SubjectAlternativeName(
          fields.ipAddresses.map((ip) => new asn.GeneralName({ iPAddress: ip })),
        );
        extensions.push(
          new asn.Extension({
            extnID: OID_SAN,
            critical: false,
            extnValue: new OctetString(AsnConvert.serialize(names)),
          }),
        );
      }
      const tbsCertificate = new asn.TBSCertificate({
        version: asn.Version.v3,
        serialNumber: positiveInteger(fields.serial ?? randomSerial()),
        signature: signatureAlgorithm,
        issuer,
        validity: new asn.Validity({ notBefore: fields.notBefore, notAfter: fields.notAfter }),
        subject: new asn.Name([rdn(OID_O, fields.organization), rdn(OID_CN, fields.commonName)]),
        subjectPublicKeyInfo: AsnConvert.parse(fields.spki, asn.SubjectPublicKeyInfo),
        extensions: new asn.Extensions(extensions),
      });
      const tbs = Buffer.from(AsnConvert.serialize(tbsCertificate));
      // ECDSA signatures go into X.509 as DER (r, s); PKCS#1 v1.5 is node:crypto's RSA default.
      const signature = ecdsa
        ? sign(digest, tbs, { key: options.key, dsaEncoding: 'der' })
        : sign(digest, tbs, options.key);
      // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm, signatureValue BIT STRING }
      // around the bytes just signed: encoding the TBSCertificate a second time through the schema
      // (asn.Certificate) cost ~0.22 ms, a third of the whole signature. The test compares the
      // result with @peculiar/x509's byte for byte (RSA signatures are deterministic).
      const bits = Buffer.concat([derHeader(DER_BIT_STRING, signature.length + 1), Buffer.of(0), signature]);
      const body = tbs.length + signatureAlgorithmDer.length + bits.length;
      return new Uint8Array(Buffer.concat([derHeader(DER_SEQUENCE, body), tbs, signatureAlgorithmDer, bits]));
    },
  };
}
