import type { CallOptions } from './types.js';

/** The master secret and salt a recovery produced (plain, or rebuilt from shares). Secret. */
export interface MasterSecretCandidate {
  masterSecret: Uint8Array;
  salt: Uint8Array;
  /** The cluster ID the shares named, when it came from shares. */
  clusterId?: Uint8Array;
}

/** One recovery call: the plain master secret and salt, or one share file (JSON bytes). */
export type RecoverRequest =
  | { kind: 'master-secret'; masterSecret: Uint8Array; salt: Uint8Array }
  | { kind: 'share'; share: Uint8Array };

/** What the node answers a recovery call. Never secret. */
export interface RecoverStatus {
  /** Whether the node now holds a master secret that opened its state disk. */
  recovered: boolean;
  /** Shares of the caller's split the node holds now (0 for the plain form). */
  received: number;
  /** Shares needed (K); 1 for the plain form. */
  threshold: number;
  /** Shares made (N); 1 for the plain form. */
  total: number;
  /**
   * Human-readable status of the caller's own split, e.g. `1 of 2 received (share 1 of 3 (cluster
   * ab12…))`. Never names another split: the caller is not attested.
   */
  message: string;
}

/** The node's side of recovery, called once per recovery call. */
export interface RecoveryHandler {
  /**
   * Handles one call; rejects (`permission-denied`, `invalid-argument`, `resource-exhausted` at a
   * bound, …) naming what was refused. `options.signal` is the call's cancellation (a call waiting
   * for the state disk stops waiting); `options.peerAddress` is the caller's IP address, which
   * per-source bounds count under.
   */
  recover(request: RecoverRequest, options?: CallOptions): Promise<RecoverStatus>;
}

/**
 * Serves recovery to operators over attested TLS (this node attests; callers verify it before they
 * send anything).
 */
export interface RecoveryEndpoint {
  /**
   * Serves `handler` until `options.signal` aborts, then stops serving (a call in flight may end).
   * Resolves once stopped; rejects when serving cannot start.
   */
  serve(handler: RecoveryHandler, options: { signal: AbortSignal }): Promise<void>;
}

/** DI token for {@link RecoveryEndpoint}. */
export const RecoveryEndpoint = Symbol.for('confboot.RecoveryEndpoint');
