/**
 * The node lock. The init flow and the join flow run side by side on a new node;
 * whichever first holds a cluster ID takes the lock, and the other one stops. The lock is one-way:
 * there is no unlock, and the node is marked (vTPM: PCR 15 extended with the cluster ID) exactly once.
 */
import { ConfbootError, isConfbootError } from '../ports/errors.js';
import type { NodeMarker } from '../ports/node-marker.js';
import { messageOf } from './errors.js';

/** The slice of {@link NodeLock} the flows use, so tests can hand in a tiny stub. */
export type NodeLockLike = Pick<NodeLock, 'tryLockOnce'>;

/** A one-way lock that marks the node as bootstrapped when taken. */
export class NodeLock {
  #locked = false;

  /** @param marker records the cluster ID in the node's measurements (called at most once). */
  constructor(private readonly marker: Pick<NodeMarker, 'markBootstrapped'>) {}

  /** Whether the lock has been taken (it never becomes free again). */
  get locked(): boolean {
    return this.#locked;
  }

  /**
   * Takes the lock if nobody has, then marks the node with `clusterId`. Resolves `{acquired: false}`
   * without touching the marker when the lock was already taken. If marking fails the lock stays
   * taken (upstream returns `(true, err)`) and the call rejects with a non-recoverable error.
   */
  tryLockOnce(clusterId: Uint8Array): Promise<{ acquired: boolean }> {
    // Compare-and-swap before any await: two callers in the same tick cannot both see "unlocked".
    if (this.#locked) return Promise.resolve({ acquired: false });
    this.#locked = true;
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
