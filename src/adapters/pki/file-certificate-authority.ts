/**
 * Cluster CA for the join service (docs/upstream.md): signs the joining node's kubelet CSR with
 * upstream's checks and certificate profile, and hands control-plane nodes the eight CA files. The
 * certificate's subject and SANs are built from the identity the caller checked (node name, IP
 * addresses), never copied from the CSR, and a CSR whose subject is not exactly the kubelet subject
 * of that name is refused (docs/identity.md).
 * CSRs are read in ./kubelet-csr.ts and the CA's key and certificate in ./ca-key.ts (the key may be
 * SEC1, PKCS#1 or PKCS#8 PEM); certificates are assembled with @peculiar/asn1-x509 and signed with
 * node:crypto (./kubelet-certificate.ts).
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
import { createHash } from 'node:crypto';
import { statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import type { CertificateAuthority, CsrInfo, KubeletIdentity } from '../../ports/certificate-authority.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import {
  CONTROL_PLANE_FILE_NAMES,
  KUBELET_CSR_CN_PREFIX,
  KUBELET_CSR_ORGANIZATION,
  kubeletSubjectProblem,
} from '../../ports/kubernetes-node.js';
import type { ControlPlaneFile } from '../../ports/types.js';
import { importCaKey, parseFirstCertificate } from './ca-key.js';
import {
  type KubeletCertificateSigner,
  kubeletCertificateSigner,
  kubeletProfileExtensions,
} from './kubelet-certificate.js';
import { CsrReader, sanNames, subjectRdns } from './kubelet-csr.js';
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
const OID_SKI = '2.5.29.14';

/** Options for {@link FileCertificateAuthority}. */
export interface FileCertificateAuthorityOptions {
  /** Time source for NotBefore/NotAfter. */
  clock: Clock;
  /** Default {@link DEFAULT_PKI_DIR}. */
  pkiDir?: string;
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
  private readonly csrs = new CsrReader();
  /** The last CA loaded (or being loaded), by the file versions it was read at. */
  private ca: { version: string; loaded: Promise<LoadedCa> } | undefined;

  constructor(options: FileCertificateAuthorityOptions) {
    this.clock = options.clock;
    this.pkiDir = options.pkiDir ?? DEFAULT_PKI_DIR;
  }

  /** Parses a DER CSR and checks its self-signature; rejects with `invalid-argument` when unparsable. */
  async inspectCsr(csrDer: Uint8Array): Promise<CsrInfo> {
    await useX509();
    const { csr, signatureValid } = await this.csrs.read(x509, csrDer);
    let names: { ips: string[]; dns: string[] };
    try {
      names = sanNames(x509, csr);
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
      publicKeySha256: publicKeySha256(csr),
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
    const { csr, signatureValid } = await this.csrs.read(x509, csrDer);
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
      const caCert = parseFirstCertificate(x509, await readFile(certPath, 'utf8'));
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

/**
 * SHA-256 (hex) of a CSR's SubjectPublicKeyInfo.
 * @throws ConfbootError `invalid-argument` when the key cannot be parsed (e.g. bad EC parameters)
 */
function publicKeySha256(csr: { publicKey: { rawData: ArrayBuffer } }): string {
  let spki: ArrayBuffer;
  try {
    spki = csr.publicKey.rawData;
  } catch (err) {
    throw new ConfbootError(
      'invalid-argument',
      `certificate request public key cannot be parsed: ${(err as Error).message}`,
    );
  }
  return createHash('sha256').update(new Uint8Array(spki)).digest('hex');
}
