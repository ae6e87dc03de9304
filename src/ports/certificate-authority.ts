import type { ControlPlaneFile } from './types.js';

/** What a CSR asks for, parsed and signature-checked. */
export interface CsrInfo {
  commonName: string;
  organizations: string[];
  ipAddresses: string[];
  dnsNames: string[];
  /** Whether the CSR's self-signature verifies. */
  signatureValid: boolean;
}

/** The cluster CA, read from the pki directory (`ca.crt`, `ca.key`). */
export interface CertificateAuthority {
  /** Parses a DER CSR; rejects with `invalid-argument` when it cannot be parsed. */
  inspectCsr(csrDer: Uint8Array): Promise<CsrInfo>;
  /** Signs a kubelet CSR with upstream's checks and profile; resolves to a PEM `CERTIFICATE`. */
  signKubeletCsr(csrDer: Uint8Array): Promise<Uint8Array>;
  /** The eight control-plane files (ca.key, sa.key, …); rejects if any is missing. */
  controlPlaneFiles(): Promise<ControlPlaneFile[]>;
}

/** DI token for {@link CertificateAuthority}. */
export const CertificateAuthority = Symbol.for('confboot.CertificateAuthority');
