/** kubeadm bootstrap tokens and the discovery CA hash (`sha256:` + hex of the CA's public key info). */
export interface BootstrapTokens {
  /** Creates a bootstrap token valid for `ttlMs` and returns it (`[a-z0-9]{6}.[a-z0-9]{16}`). Secret. */
  createToken(ttlMs: number): Promise<string>;
  /** `sha256:<hex>` of the cluster CA's SPKI, from admin.conf's current context. */
  discoveryCaCertHash(): Promise<string>;
}

/** DI token for {@link BootstrapTokens}. */
export const BootstrapTokens = Symbol.for('confboot.BootstrapTokens');
