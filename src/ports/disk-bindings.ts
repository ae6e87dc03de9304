import { ConfbootError } from './errors.js';
import type { CallOptions } from './types.js';

/** Which node a state disk belongs to: recorded when a node first asks for the disk's key. */
export interface DiskBinding {
  /** The state disk's UUID, lower case. */
  diskUuid: string;
  /** The node's name (normalised like a kubelet CSR's node name). */
  nodeName: string;
  /**
   * Who the node is, as the join service authenticated it: `instance-id/<id>` when the cloud's
   * metadata gives the caller's instance an immutable ID (GCP, AWS, Azure, OpenStack),
   * `instance/<name>` (the folded name) when it names the instance but has no ID (QEMU),
   * `address/<ip>` without a PeerIdentity. A binding recorded as `instance/<name>` before IDs were
   * recorded still matches a caller with that folded name.
   */
  owner: string;
}

/**
 * The record of which node joined with which disk UUID (docs/identity.md). The join service asks it
 * before it hands out a state disk key, so one attested node cannot obtain another node's key by
 * sending that node's disk UUID. Implementations must be shared by every join service replica
 * (production: DiskBinding resources in the Kubernetes API).
 */
export interface DiskBindings {
  /**
   * Records `binding` unless the disk is already bound, atomically (first writer wins). Resolves
   * with the binding in force afterwards: `binding` itself, or the existing record, which may name
   * another owner. Rejects (usually `unavailable`) when the record can be neither read nor written:
   * callers must then issue nothing.
   */
  bind(binding: DiskBinding, options?: CallOptions): Promise<DiskBinding>;
  /**
   * Removes every binding whose owner is one of `owners` except the binding of disk `keep`, and
   * resolves with the removed bindings. The join service calls it only for an attested node that
   * joined fresh with disk `keep` and whose address resolved to an instance of this cluster
   * (`owners` is that instance's owner strings), so a disk that was wiped and reformatted (a new
   * UUID) leaves no stale binding behind. Rejects (usually `unavailable`) when the record cannot be
   * read or changed; bindings removed before the failure stay removed.
   */
  releaseOthers(owners: readonly string[], keep: string, options?: CallOptions): Promise<DiskBinding[]>;
}

/** DI token for {@link DiskBindings}. */
export const DiskBindings = Symbol.for('confboot.DiskBindings');

/** A node asked for a state disk bound to another node. */
export class DiskBoundError extends ConfbootError {
  override readonly name = 'DiskBoundError';
  /** Short stable reason for audit events and metrics. */
  override readonly reason = 'disk-bound';

  constructor(message: string) {
    super('permission-denied', message, { recoverable: false, reason: 'disk-bound' });
  }
}

/** Type guard for {@link DiskBoundError}. */
export function isDiskBoundError(err: unknown): err is DiskBoundError {
  return err instanceof DiskBoundError;
}
