/**
 * The node lock. The init flow and the join flow run side by side on a new node;
 * whichever first holds a cluster ID takes the lock, and the other one stops. The lock is one-way:
 * there is no unlock, and the node is marked (vTPM: PCR 15 extended with the cluster ID) exactly once.
 */
import { ConfbootError, isConfbootError, messageOf } from '../ports/errors.js';
import type { NodeMarker } from '../ports/node-marker.js';

/** The slice of {@link NodeLock} the flows use, so tests can hand in a tiny stub. */
export interface NodeLockLike {
  tryLockOnce(clusterId: Uint8Array): Promise<{ acquired: boolean }>;
}

/** Who holds a {@link NodeLock}: the name the taker gave, and the cluster ID it took it with. */
export interface NodeLockHolder {
  by: string;
  clusterId: Uint8Array;
}

/** A one-way lock that marks the node as bootstrapped when taken. */
export class NodeLock {
  #holder: NodeLockHolder | undefined;

  /** @param marker records the cluster ID in the node's measurements (called at most once). */
  constructor(private readonly marker: Pick<NodeMarker, 'markBootstrapped'>) {}

  /** Whether the lock has been taken (it never becomes free again). */
  get locked(): boolean {
    return this.#holder !== undefined;
  }

  /**
   * Who took the lock, or undefined while it is free. Set the moment the lock is taken, so it also
   * names the taker when marking the node failed (the lock stays taken then).
   */
  get holder(): NodeLockHolder | undefined {
    return this.#holder === undefined
      ? undefined
      : { by: this.#holder.by, clusterId: new Uint8Array(this.#holder.clusterId) };
  }

  /** A view of this lock that takes it in the name of `by` (see {@link holder}). */
  as(by: string): NodeLockLike {
    return { tryLockOnce: (clusterId) => this.tryLockOnce(clusterId, by) };
  }

  /**
   * Takes the lock if nobody has, then marks the node with `clusterId`. Resolves `{acquired: false}`
   * without touching the marker when the lock was already taken. If marking fails the lock stays
   * taken (upstream returns `(true, err)`) and the call rejects with a non-recoverable error.
   * `by` names the taker for {@link holder}.
   */
  tryLockOnce(clusterId: Uint8Array, by = 'unnamed'): Promise<{ acquired: boolean }> {
    // Compare-and-swap before any await: two callers in the same tick cannot both see "unlocked".
    if (this.#holder !== undefined) return Promise.resolve({ acquired: false });
    this.#holder = { by, clusterId: new Uint8Array(clusterId) };
    // The executor runs synchronously, so the marker is called now and a synchronous throw rejects too.
    return new Promise<void>((resolve) => resolve(this.marker.markBootstrapped(clusterId))).then(
      () => ({ acquired: true }),
      (err: unknown) => {
        throw new ConfbootError(
          isConfbootError(err) ? err.code : 'internal',
          `marking node as bootstrapped (node lock is held): ${messageOf(err)}`,
          { cause: err, recoverable: false },
        );
      },
    );
  }
}
