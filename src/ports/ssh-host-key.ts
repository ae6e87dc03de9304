/**
 * The node's SSH host key, for emergency SSH: the join request carries its public key (field 4)
 * and the names the host goes by (field 5); the join ticket's host certificate certifies it, and
 * sshd presents both (`HostKey`, `HostCertificate`).
 */
export interface SshHostKey {
  /**
   * The host's public key in SSH wire format, or undefined when the node has no host key (no sshd:
   * emergency SSH is not set up on this node). Rejects when the key exists but cannot be read.
   */
  publicKey(): Promise<Uint8Array | undefined>;
  /** Names for the host certificate: the node's non-loopback addresses and its hostname. */
  principals(): Promise<string[]>;
}

/** DI token for {@link SshHostKey}. */
export const SshHostKey = Symbol.for('confboot.SshHostKey');
