/** A fresh kubelet key and CSR. */
export interface KubeletCsr {
  /** DER PKCS#10 CSR. */
  csrDer: Uint8Array;
  /** PEM `EC PRIVATE KEY` (SEC1) of the new ECDSA P-256 key. Secret. */
  keyPem: Uint8Array;
}

/** Makes kubelet CSRs. */
export interface CsrFactory {
  /** New ECDSA P-256 key; CSR with O=system:nodes, CN=system:node:<nodeName>, IP SANs `ips`. */
  create(nodeName: string, ips: string[]): Promise<KubeletCsr>;
}

/** DI token for {@link CsrFactory}. */
export const CsrFactory = Symbol.for('confboot.CsrFactory');
