/**
 * Reading a kubelet certificate request (adapter layer, src/adapters/pki): the DER CSR parsed with
 * @peculiar/x509, its subject RDNs and SANs, and its self-signature checked — once per request (a
 * {@link CsrReader} memoises the result per CSR byte array object, reused only while the array still
 * holds the same bytes). The file CA (file-certificate-authority.ts) reads every CSR through it.
 */
import { constants, createPublicKey, verify as verifySignature } from 'node:crypto';
import type * as X509 from '@peculiar/x509';
import { ConfbootError } from '../../ports/errors.js';
import type { NameRdns } from '../../ports/kubernetes-node.js';
import type { X509Module } from './x509-loader.js';

const OID_SAN = '2.5.29.17';

function parseCsr(x509: X509Module, csrDer: Uint8Array): X509.Pkcs10CertificateRequest {
  if (csrDer.length === 0) throw new ConfbootError('invalid-argument', 'certificate request is empty');
  try {
    return new x509.Pkcs10CertificateRequest(new Uint8Array(csrDer));
  } catch (err) {
    throw new ConfbootError(
      'invalid-argument',
      `certificate request cannot be parsed: ${(err as Error).message}`,
      {
        cause: err,
      },
    );
  }
}

/** SAN names per parsed CSR object (a parsed CSR is immutable; see FileCertificateAuthority.parsed). */
const sanMemo = new WeakMap<
  X509.Pkcs10CertificateRequest,
  { ips: readonly string[]; dns: readonly string[] }
>();

/** The CSR's IP and DNS SANs, decoded once per parsed CSR; fresh arrays for every caller. */
export function sanNames(
  x509: X509Module,
  csr: X509.Pkcs10CertificateRequest,
): { ips: string[]; dns: string[] } {
  let names = sanMemo.get(csr);
  if (names === undefined) {
    const ext = csr.getExtension(OID_SAN);
    const san =
      ext === null
        ? undefined
        : ext instanceof x509.SubjectAlternativeNameExtension
          ? ext
          : new x509.SubjectAlternativeNameExtension(ext.rawData);
    names = {
      ips: san?.names.items.filter((n) => n.type === 'ip').map((n) => n.value) ?? [],
      dns: san?.names.items.filter((n) => n.type === 'dns').map((n) => n.value) ?? [],
    };
    sanMemo.set(csr, names);
  }
  return { ips: [...names.ips], dns: [...names.dns] };
}

/** The subject's RDNs in order with every attribute (type as @peculiar/x509 names it: `CN`, `O`, … or an OID). */
export function subjectRdns(csr: X509.Pkcs10CertificateRequest): NameRdns {
  return csr.subjectName
    .toJSON()
    .map((rdn) => Object.entries(rdn).flatMap(([type, values]) => values.map((value) => ({ type, value }))));
}

/** Node's digest name of a WebCrypto hash (`SHA-256` → `sha256`), for the SHA-1/SHA-2 family only. */
function nodeHash(hash: unknown): string | undefined {
  const name = typeof hash === 'string' ? hash : (hash as { name?: unknown } | undefined)?.name;
  return typeof name === 'string' && /^SHA-(1|256|384|512)$/.test(name)
    ? name.toLowerCase().replace('-', '')
    : undefined;
}

/**
 * The CSR's self-signature checked with node:crypto on the DER fields @peculiar/x509 parsed (the
 * signed CertificationRequestInfo, the signature BIT STRING and the SubjectPublicKeyInfo): about a
 * third of the cost of @peculiar/x509's `verify()`, which imports the key through WebCrypto and
 * re-encodes the signature. The declared signature algorithm must match the key's type (ECDSA ↔ EC,
 * RSASSA-PKCS1-v1_5 ↔ RSA, RSA-PSS ↔ RSA or RSA-PSS with the declared salt length); undefined for
 * any other algorithm, which {@link verifyCsr} leaves to @peculiar/x509.
 */
function verifyCsrWithNode(csr: X509.Pkcs10CertificateRequest): boolean | undefined {
  const alg = csr.signatureAlgorithm as { name?: string; hash?: unknown; saltLength?: unknown };
  const hash = nodeHash(alg.hash);
  if (hash === undefined) return undefined;
  // `tbs` (the signed CertificationRequestInfo DER) is private in @peculiar/x509's typings; without
  // it (another library version) the library's own verify runs instead.
  const tbsDer = (csr as unknown as { tbs?: unknown }).tbs;
  let tbs: Uint8Array;
  if (tbsDer instanceof ArrayBuffer) tbs = new Uint8Array(tbsDer);
  else if (ArrayBuffer.isView(tbsDer))
    tbs = new Uint8Array(tbsDer.buffer, tbsDer.byteOffset, tbsDer.byteLength);
  else return undefined;
  const key = createPublicKey({ key: Buffer.from(csr.publicKey.rawData), format: 'der', type: 'spki' });
  const signature = new Uint8Array(csr.signature);
  switch (alg.name) {
    case 'ECDSA':
      return key.asymmetricKeyType === 'ec' && verifySignature(hash, tbs, key, signature);
    case 'RSASSA-PKCS1-v1_5':
      return key.asymmetricKeyType === 'rsa' && verifySignature(hash, tbs, key, signature);
    case 'RSA-PSS':
      if (typeof alg.saltLength !== 'number') return undefined;
      return (
        (key.asymmetricKeyType === 'rsa' || key.asymmetricKeyType === 'rsa-pss') &&
        verifySignature(
          hash,
          tbs,
          { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: alg.saltLength },
          signature,
        )
      );
    default:
      return undefined;
  }
}

export async function verifyCsr(csr: X509.Pkcs10CertificateRequest): Promise<boolean> {
  try {
    return verifyCsrWithNode(csr) ?? (await csr.verify());
  } catch {
    return false;
  }
}

/** A CSR parsed, with whether its self-signature verifies. */
export interface ReadCsr {
  csr: X509.Pkcs10CertificateRequest;
  signatureValid: boolean;
}

/** A CSR parsed and signature-checked once, with the bytes it was parsed from. */
interface ParsedCsr {
  /** Copy of the DER the result belongs to (the memo is reused only for equal bytes). */
  der: Uint8Array;
  result: Promise<ReadCsr>;
}

/** Parses CSRs and checks their self-signatures, once per byte array object and content. */
export class CsrReader {
  readonly #memo = new WeakMap<Uint8Array, ParsedCsr>();

  /**
   * Parses `csrDer` and verifies its self-signature: the join service passes the same request array
   * to every step, so the deny-list check, the ticket issuer and the signature share one parse and
   * one verification. Throws `invalid-argument` when it cannot be parsed.
   */
  read(x509: X509Module, csrDer: Uint8Array): Promise<ReadCsr> {
    const memo = this.#memo.get(csrDer);
    if (
      memo !== undefined &&
      Buffer.from(memo.der.buffer, memo.der.byteOffset, memo.der.byteLength).equals(csrDer)
    )
      return memo.result;
    const csr = parseCsr(x509, csrDer);
    const result = verifyCsr(csr).then((signatureValid) => ({ csr, signatureValid }));
    this.#memo.set(csrDer, { der: new Uint8Array(csrDer), result });
    return result;
  }
}
