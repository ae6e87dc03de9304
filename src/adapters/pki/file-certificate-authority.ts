/**
 * Cluster CA for the join service (docs/upstream.md): signs the joining node's kubelet CSR with
 * upstream's checks and certificate profile, and hands control-plane nodes the eight CA files. The
 * certificate's subject and SANs are built from the identity the caller checked (node name, IP
 * addresses), never copied from the CSR, and a CSR whose subject is not exactly the kubelet subject
 * of that name is refused (docs/identity.md).
 * CSRs are parsed with @peculiar/x509; certificates are assembled with @peculiar/asn1-x509 and
 * signed with node:crypto (./kubelet-certificate.ts); the CA key may be SEC1, PKCS#1 or PKCS#8 PEM.
 *
 * Two caches keep the per-join cost down (bench/analysis.md) without weakening a check:
 * - the parsed CA certificate and imported key are kept while `stat` of ca.crt and ca.key reports
 *   the same device, inode, size, mtime and ctime; every signature re-stats both files, so a rotated
 *   CA (rewritten or renamed over) is picked up by the next signature;
 * - a CSR is parsed and its signature verified once per request: the result is memoised per CSR
 *   byte array object (a WeakMap, so it lives as long as the request) together with a copy of the
 *   bytes, and reused only while the array still holds exactly those bytes.
 * The CSR's self-signature is checked with node:crypto on the fields @peculiar/x509 parsed (ECDSA,
 * RSASSA-PKCS1-v1_5, RSA-PSS; anything else through @peculiar/x509's own verify).
 */
import {
  constants,
  createPrivateKey,
  createPublicKey,
  type KeyObject,
  verify as verifySignature,
} from 'node:crypto';
import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type * as X509 from '@peculiar/x509';
import type { CertificateAuthority, CsrInfo, KubeletIdentity } from '../../ports/certificate-authority.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import {
  CONTROL_PLANE_FILE_NAMES,
  KUBELET_CSR_CN_PREFIX,
  KUBELET_CSR_ORGANIZATION,
  kubeletSubjectProblem,
  type NameRdns,
} from '../../ports/kubernetes-node.js';
import type { ControlPlaneFile } from '../../ports/types.js';
import {
  type KubeletCertificateSigner,
  kubeletCertificateSigner,
  kubeletProfileExtensions,
} from './kubelet-certificate.js';
import { loadX509, type X509Module } from './x509-loader.js';

/**
 * @peculiar/x509, loaded on first use (not at import: it is the slowest import of the join
 * service's start-up, see ./x509-loader.ts). Every entry point awaits {@link useX509} first.
 */
let x509: X509Module;

async function useX509(): Promise<void> {
  x509 ??= await loadX509();
}

/** Upstream's pki directory. */
export const DEFAULT_PKI_DIR = '/etc/kubernetes/pki';

const HOUR_MS = 60 * 60 * 1000;
const OID_CN = '2.5.4.3';
const OID_O = '2.5.4.10';
const OID_SAN = '2.5.29.17';
const OID_SKI = '2.5.29.14';

/** Options for {@link FileCertificateAuthority}. */
export interface FileCertificateAuthorityOptions {
  /** Time source for NotBefore/NotAfter. */
  clock: Clock;
  /** Default {@link DEFAULT_PKI_DIR}. */
  pkiDir?: string;
}

/** The CA's signing key and the algorithm to sign with (named as WebCrypto names it). */
interface SigningKey {
  keyObject: KeyObject;
  algorithm: { name: 'ECDSA' | 'RSASSA-PKCS1-v1_5'; hash: string };
}

/** Imports a CA private key PEM of type EC PRIVATE KEY, RSA PRIVATE KEY or PRIVATE KEY. */
export async function importCaKey(pem: string): Promise<SigningKey> {
  const match = /-----BEGIN ([A-Z0-9 ]+)-----/.exec(pem);
  if (match === null) throw new ConfbootError('internal', 'CA key is not PEM');
  const type = match[1];
  const format = { 'EC PRIVATE KEY': 'sec1', 'RSA PRIVATE KEY': 'pkcs1', 'PRIVATE KEY': 'pkcs8' } as const;
  if (type !== 'EC PRIVATE KEY' && type !== 'RSA PRIVATE KEY' && type !== 'PRIVATE KEY') {
    throw new ConfbootError('internal', `CA key has unsupported PEM type "${type}"`);
  }
  let keyObject: KeyObject;
  try {
    const block = new RegExp(`-----BEGIN ${type}-----([\\s\\S]*?)-----END ${type}-----`).exec(pem);
    if (block === null) throw new Error('unterminated PEM block');
    const der = Buffer.from((block[1] ?? '').replace(/\s+/g, ''), 'base64');
    keyObject = createPrivateKey({ key: der, format: 'der', type: format[type] });
  } catch (err) {
    throw new ConfbootError('internal', `CA key (${type}) cannot be parsed: ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (keyObject.asymmetricKeyType === 'ec') {
    // The hash that goes with each curve (ecdsa-with-SHA256 for P-256, and so on).
    const hashes: Record<string, string> = {
      prime256v1: 'SHA-256',
      secp384r1: 'SHA-384',
      secp521r1: 'SHA-512',
    };
    const hash = hashes[keyObject.asymmetricKeyDetails?.namedCurve ?? ''];
    if (hash === undefined) {
      throw new ConfbootError(
        'internal',
        `CA key uses unsupported curve ${keyObject.asymmetricKeyDetails?.namedCurve}`,
      );
    }
    return { keyObject, algorithm: { name: 'ECDSA', hash } };
  }
  if (keyObject.asymmetricKeyType === 'rsa') {
    return { keyObject, algorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } };
  }
  throw new ConfbootError(
    'internal',
    `CA key type ${keyObject.asymmetricKeyType} is not supported (EC or RSA)`,
  );
}

/** Parses the first PEM CERTIFICATE block of `pem`. */
function parseFirstCertificate(pem: string): X509.X509Certificate {
  const block = /-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/.exec(pem);
  if (block === null) throw new ConfbootError('internal', 'CA certificate has no PEM CERTIFICATE block');
  try {
    return new x509.X509Certificate(Buffer.from((block[1] ?? '').replace(/\s+/g, ''), 'base64'));
  } catch (err) {
    throw new ConfbootError('internal', `CA certificate cannot be parsed: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

function parseCsr(csrDer: Uint8Array): X509.Pkcs10CertificateRequest {
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
function sanNames(csr: X509.Pkcs10CertificateRequest): { ips: string[]; dns: string[] } {
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
function subjectRdns(csr: X509.Pkcs10CertificateRequest): NameRdns {
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

async function verifyCsr(csr: X509.Pkcs10CertificateRequest): Promise<boolean> {
  try {
    return verifyCsrWithNode(csr) ?? (await csr.verify());
  } catch {
    return false;
  }
}

/** A CSR parsed and signature-checked once, with the bytes it was parsed from. */
interface ParsedCsr {
  /** Copy of the DER the result belongs to (the memo is reused only for equal bytes). */
  der: Uint8Array;
  result: Promise<{ csr: X509.Pkcs10CertificateRequest; signatureValid: boolean }>;
}

/** The loaded CA and the file identities it was loaded from. */
interface LoadedCa {
  /** dev/ino/size/mtime/ctime of ca.crt and ca.key when they were read. */
  version: string;
  /** Builds and signs kubelet certificates under this CA (./kubelet-certificate.ts). */
  signer: KubeletCertificateSigner;
}

/** {@link CertificateAuthority} over the kubeadm pki directory. */
export class FileCertificateAuthority implements CertificateAuthority {
  /** The pki directory. */
  readonly pkiDir: string;
  private readonly clock: Clock;
  private readonly csrMemo = new WeakMap<Uint8Array, ParsedCsr>();
  /** The last CA loaded (or being loaded), by the file versions it was read at. */
  private ca: { version: string; loaded: Promise<LoadedCa> } | undefined;

  constructor(options: FileCertificateAuthorityOptions) {
    this.clock = options.clock;
    this.pkiDir = options.pkiDir ?? DEFAULT_PKI_DIR;
  }

  /**
   * Parses `csrDer` and verifies its self-signature, once per byte array object and content: the
   * join service passes the same request array to every step, so the deny-list check, the ticket
   * issuer and the signature share one parse and one verification.
   */
  private parsed(
    csrDer: Uint8Array,
  ): Promise<{ csr: X509.Pkcs10CertificateRequest; signatureValid: boolean }> {
    const memo = this.csrMemo.get(csrDer);
    if (
      memo !== undefined &&
      Buffer.from(memo.der.buffer, memo.der.byteOffset, memo.der.byteLength).equals(csrDer)
    )
      return memo.result;
    const csr = parseCsr(csrDer);
    const result = verifyCsr(csr).then((signatureValid) => ({ csr, signatureValid }));
    this.csrMemo.set(csrDer, { der: new Uint8Array(csrDer), result });
    return result;
  }

  /** Parses a DER CSR and checks its self-signature; rejects with `invalid-argument` when unparsable. */
  async inspectCsr(csrDer: Uint8Array): Promise<CsrInfo> {
    await useX509();
    const { csr, signatureValid } = await this.parsed(csrDer);
    let names: { ips: string[]; dns: string[] };
    try {
      names = sanNames(csr);
    } catch (err) {
      throw new ConfbootError(
        'invalid-argument',
        `certificate request SANs cannot be parsed: ${(err as Error).message}`,
      );
    }
    return {
      subject: subjectRdns(csr),
      commonName: csr.subjectName.getField(OID_CN)[0] ?? '',
      organizations: csr.subjectName.getField(OID_O),
      ipAddresses: names.ips,
      dnsNames: names.dns,
      signatureValid,
    };
  }

  /**
   * Signs a kubelet CSR's public key for `identity`: the CSR's signature must verify and its subject
   * must be exactly `O=system:nodes, CN=system:node:<identity.nodeName>` (two single-valued RDNs).
   * The certificate's subject and IP SANs are built from `identity`, never copied from the CSR; it
   * is valid from now-2h to now+365d and is for client and server auth.
   */
  async signKubeletCsr(csrDer: Uint8Array, identity: KubeletIdentity): Promise<Uint8Array> {
    return this.signKubeletCsrAt(csrDer, identity, this.clock.now());
  }

  /**
   * {@link signKubeletCsr} with the validity counted from `now` instead of the clock's time (a
   * worker thread signs with the time of the thread that asked).
   */
  async signKubeletCsrAt(csrDer: Uint8Array, identity: KubeletIdentity, now: Date): Promise<Uint8Array> {
    await useX509();
    const op = 'signing kubelet certificate';
    const refuse = (why: string) =>
      new ConfbootError('invalid-argument', `${op}: certificate request ${why}`);
    const { csr, signatureValid } = await this.parsed(csrDer);
    if (!signatureValid) throw refuse('signature is invalid');
    const problem = kubeletSubjectProblem(subjectRdns(csr));
    if (problem !== undefined) throw refuse(problem);
    const cn = `${KUBELET_CSR_CN_PREFIX}${identity.nodeName}`;
    const requested = csr.subjectName.getField(OID_CN)[0];
    if (identity.nodeName === '' || requested !== cn)
      throw refuse(`names ${JSON.stringify(requested)}, not the checked ${JSON.stringify(cn)}`);
    const ips = [...identity.ipAddresses];
    const notIp = ips.find((ip) => isIP(ip) === 0);
    if (notIp !== undefined)
      throw new ConfbootError('invalid-argument', `${op}: ${JSON.stringify(notIp)} is not an IP address`);

    let ca: LoadedCa;
    try {
      ca = await this.loadCa();
    } catch (err) {
      throw wrapError(`${op}: loading the cluster CA from ${this.pkiDir}`, err, 'internal');
    }
    const nowMs = now.getTime();
    try {
      const der = ca.signer.sign({
        // Built from the checked values: never the CSR's own encoding of its subject.
        organization: KUBELET_CSR_ORGANIZATION,
        commonName: cn,
        ipAddresses: ips,
        spki: csr.publicKey.rawData,
        notBefore: new Date(nowMs - 2 * HOUR_MS),
        notAfter: new Date(nowMs + 365 * 24 * HOUR_MS),
      });
      return new TextEncoder().encode(`${x509.PemConverter.encode(der, 'CERTIFICATE').trim()}\n`);
    } catch (err) {
      throw wrapError(`${op}: creating the certificate`, err, 'internal');
    }
  }

  /**
   * The CA certificate and signing key: read, parsed and imported again only when `stat` reports
   * a different ca.crt or ca.key than last time (device, inode, size, mtime, ctime).
   */
  private async loadCa(): Promise<LoadedCa> {
    const certPath = join(this.pkiDir, 'ca.crt');
    const keyPath = join(this.pkiDir, 'ca.key');
    // Synchronous: two local stats cost ~15 µs each; through the thread pool they queue behind
    // every other file and crypto job of a burst.
    const certStat = statSync(certPath, { bigint: true });
    const keyStat = statSync(keyPath, { bigint: true });
    const id = (s: typeof certStat) => `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`;
    const version = `${id(certStat)}/${id(keyStat)}`;
    if (this.ca?.version === version) return this.ca.loaded;
    const loaded = (async (): Promise<LoadedCa> => {
      const caCert = parseFirstCertificate(await readFile(certPath, 'utf8'));
      const signing = await importCaKey(await readFile(keyPath, 'utf8'));
      const ski = caCert.getExtension(OID_SKI);
      const authorityKeyId =
        ski === null
          ? []
          : [
              new x509.AuthorityKeyIdentifierExtension(
                new x509.SubjectKeyIdentifierExtension(ski.rawData).keyId,
                false,
              ),
            ];
      const signer = await kubeletCertificateSigner(x509, {
        caCert,
        key: signing.keyObject,
        algorithm: signing.algorithm,
        extensions: [...kubeletProfileExtensions(x509), ...authorityKeyId],
      });
      return { version, signer };
    })();
    const entry = { version, loaded };
    this.ca = entry;
    // A failed load is not kept: the next signature tries again.
    loaded.catch(() => {
      if (this.ca === entry) this.ca = undefined;
    });
    return loaded;
  }

  /** Reads the eight control-plane files; any missing one is an error naming it. */
  async controlPlaneFiles(): Promise<ControlPlaneFile[]> {
    const files: ControlPlaneFile[] = [];
    for (const name of CONTROL_PLANE_FILE_NAMES) {
      const path = join(this.pkiDir, name);
      try {
        files.push({ name, data: new Uint8Array(await readFile(path)) });
      } catch (err) {
        throw wrapError(`reading control-plane file ${path}`, err, 'internal');
      }
    }
    return files;
  }
}
