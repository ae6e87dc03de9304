import type { Role } from './types.js';

/** Who the cluster's source of truth (the cloud's instance metadata) says is behind an address. */
export interface PeerInstance {
  /** Node name as the metadata reports it (the join service normalises it like a CSR's node name). */
  name: string;
  /** Every IP address of the instance that may appear in its kubelet certificate. */
  ips: string[];
  /** The instance's role; `Unknown` while the cloud has not assigned one. */
  role: Role;
  /**
   * The cloud's immutable instance ID (InstanceMetadata.instanceId), where the cloud has one: the
   * join service binds state disks to it rather than to the name, which another instance may
   * share once folded.
   */
  instanceId?: string;
}

/**
 * Binds a caller's network address to a cluster instance, so the join service can check that an
 * attested node asks for a kubelet certificate for its own name, its own addresses and its own
 * role only (docs/identity.md). The attested TLS connection proves *what* software runs on the
 * caller; this port says *which* instance the caller is.
 */
export interface PeerIdentity {
  /**
   * The instance of this cluster whose address is `peerIp` (IPv4 or IPv6, as the connection
   * reports it), or undefined when no instance of this cluster has that address. Rejects with
   * `unavailable` when the source of truth cannot be asked right now (retry later).
   */
  resolve(peerIp: string): Promise<PeerInstance | undefined>;
}

/** DI token for {@link PeerIdentity}. */
export const PeerIdentity = Symbol.for('confboot.PeerIdentity');
