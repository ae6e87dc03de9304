import type { NameRdns } from './kubernetes-node.js';
import type { ControlPlaneFile } from './types.js';

/** What a CSR asks for, parsed and signature-checked. */
export interface CsrInfo {
  /** The subject's RDNs in order, every attribute of each (what the checks read). */
  subject: NameRdns;
  /** The first common name of the subject (for messages; checks read {@link subject}). */
  commonName: string;
  /** Every organization of the subject, in order. */
  organizations: string[];
  ipAddresses: string[];
  dnsNames: string[];
  /** Whether the CSR's self-signature verifies. */
  signatureValid: boolean;
  /**
   * SHA-256 (hex) of the CSR's SubjectPublicKeyInfo (DER). A kubelet certificate signed from the
   * CSR carries that same key, so this is also the hash of the issued certificate's key.
   */
  publicKeySha256: string;
}

/**
 * The identity a kubelet certificate is issued for. The certificate's subject and SANs are built
 * from these checked values only, never copied from the request.
 */
export interface KubeletIdentity {
  /** The checked node name: the subject is exactly `O=system:nodes, CN=system:node:<nodeName>`. */
  nodeName: string;
  /** The checked IP addresses: the certificate's only SANs (none when empty). */
  ipAddresses: readonly string[];
}

/** The cluster CA, read from the pki directory (`ca.crt`, `ca.key`). */
export interface CertificateAuthority {
  /** Parses a DER CSR; rejects with `invalid-argument` when it cannot be parsed. */
  inspectCsr(csrDer: Uint8Array): Promise<CsrInfo>;
  /**
   * Signs a kubelet CSR's public key (unchanged: the certificate's key is the CSR's) for `identity`
   * with upstream's profile; resolves to a PEM `CERTIFICATE`. Rejects with `invalid-argument` when the CSR's signature does not verify or its
   * subject is not exactly the kubelet subject of `identity.nodeName`.
   */
  signKubeletCsr(csrDer: Uint8Array, identity: KubeletIdentity): Promise<Uint8Array>;
  /** The eight control-plane files (ca.key, sa.key, …); rejects if any is missing. */
  controlPlaneFiles(): Promise<ControlPlaneFile[]>;
}

/** DI token for {@link CertificateAuthority}. */
export const CertificateAuthority = Symbol.for('confboot.CertificateAuthority');
