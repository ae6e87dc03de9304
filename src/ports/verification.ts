/**
 * The verification service's ports: a node answers a caller's fresh nonce with an attestation
 * document bound to it (no secrets, unauthenticated callers), and a verifier asks a node for one.
 */
import type { CallOptions } from './types.js';
import type { Variant } from './variant.js';

/** A document a node issued for a caller's nonce. */
export interface NonceAttestation {
  /** The node's attestation variant, e.g. `qemu-vtpm`. */
  variant: Variant;
  /** The variant's OID. */
  oid: string;
  /** The document exactly as the variant's issuer produced it. */
  document: Uint8Array;
}

/** The node's side: one call per caller request. */
export interface NonceAttester {
  /**
   * Issues a document that binds `nonce`. Rejects `invalid-argument` for a nonce out of bounds,
   * `resource-exhausted` at a bound on callers, `deadline-exceeded` when the request's deadline
   * passed, `unavailable` when `options.signal` aborted (the caller went away), `internal` when the
   * issuer failed. `options.peerAddress` is the caller's address, which per-source bounds count under.
   */
  attest(nonce: Uint8Array, options?: CallOptions): Promise<NonceAttestation>;
}

/** What a verifier received from a node. */
export interface FetchedAttestation {
  /** The document bytes as the node sent them. */
  document: Uint8Array;
  /** The IP address the answer came from (the connection's remote address). */
  peerAddress: string;
}

/** The verifier's side: asks the node at `endpoint` for a document bound to `nonce`. */
export interface AttestationFetcher {
  /**
   * Rejects `unavailable` when the node cannot be reached or answers with a server error,
   * `resource-exhausted` when it refuses for its bounds, `invalid-argument` when it refuses the
   * request, `deadline-exceeded` past `options.timeoutInMs`.
   */
  fetch(endpoint: string, nonce: Uint8Array, options?: CallOptions): Promise<FetchedAttestation>;
}
