/**
 * Join service: bounds derived from one memory budget, so that nothing an attested or unattested peer
 * sends pushes the process past it. The budget (MiB, `--memory-budget-mib`) is split into a baseline
 * (Node, the loaded modules and caches, before any request) and what remains, a third each for
 * requests in progress, attested connections, and TLS handshakes in progress:
 *
 * - every request field has a size limit checked before parsing (REQUEST_FIELD_LIMITS in the domain),
 *   so the gRPC receive limit is the largest request those limits allow (34 KiB, not grpc-js's 4 MiB)
 *   and a larger message is refused by grpc-js before it is decoded;
 * - requests held at once (running or queued for a slot) are bounded by a byte budget over their
 *   field sizes, and their number by the concurrency cap, lowered to what the request share allows;
 * - attested connections are capped, each with at most a few concurrent streams and a bounded HTTP/2
 *   session memory, so bytes still being received are bounded too;
 * - connections in their TLS handshake are capped: each holds the native state of a handshake in
 *   progress, and a burst of thousands (or peers that stall) would otherwise hold it all at once;
 *   beyond the cap they wait, unread, in the listener's queue.
 *
 * Pre-attestation connections are further bounded by the attested TLS listener (its own caps and
 * the largest attestation document).
 */
import { maxTicketRequestBytes } from '../../domain/ticket-request.js';
import { ConfbootError } from '../../ports/errors.js';
import { JOIN_SERVICE_MEMORY_BUDGET_MIB } from '../defaults.js';

const MIB = 1024 * 1024;
/**
 * RSS of a started join service before any request, with room to spare (measured: ~85 MiB after a
 * first ticket in test/attack/memory.test.ts; production loads the Kubernetes client and a cloud SDK).
 */
export const BASELINE_RESERVE_MIB = 160;
/** Memory one request in progress holds besides its message copies (stream, parse, calls, GC slack). */
export const PER_REQUEST_OVERHEAD_BYTES = 256 * 1024;
/** Copies of a message a request may hold (HTTP/2 frames, grpc-js buffer, decoded fields). */
export const MESSAGE_COPIES = 4;
/** Concurrent streams per attested connection (a joining node makes one call per connection). */
export const MAX_STREAMS_PER_CONNECTION = 4;
/** Memory one attested connection holds besides its streams (TLS and HTTP/2 session buffers). */
export const PER_CONNECTION_OVERHEAD_BYTES = 192 * 1024;

/**
 * Memory one connection in its handshake holds: measured 74–83 KiB of RSS per server-side TLS 1.3
 * handshake waiting for the client's second flight (Node 24, OpenSSL 3.5, ECDSA P-256, client
 * certificate requested; 64 KiB on Node 20), plus the socket and its ClientHello copy.
 */
export const PER_HANDSHAKE_BYTES = 96 * 1024;

/** What a memory budget allows. */
export interface MemoryBounds {
  budgetMib: number;
  /** gRPC receive limit (bytes), the largest request the field limits allow. */
  maxMessageBytes: number;
  /** Field bytes of requests held at once (running or waiting for a slot). */
  requestBytesInFlight: number;
  /** Cap on requests handled at once (the configured cap, lowered to what the budget allows). */
  maxConcurrent: number;
  /** Cap on attested connections open at once. */
  maxConnections: number;
  /** Cap on connections in their TLS handshake at once. */
  maxHandshakes: number;
  /** Concurrent streams per connection. */
  maxStreamsPerConnection: number;
  /** HTTP/2 session memory per connection, MiB (grpc-js `grpc-node.max_session_memory`). */
  maxSessionMemoryMib: number;
}

/**
 * Derives the bounds from `budgetMib` (default {@link JOIN_SERVICE_MEMORY_BUDGET_MIB}); the
 * concurrency cap is `requestedMaxConcurrent` (0 = as many as the budget allows) lowered to what
 * the budget allows.
 * @throws ConfbootError `invalid-argument` when the budget does not exceed the baseline
 */
export function deriveMemoryBounds(
  budgetMib: number = JOIN_SERVICE_MEMORY_BUDGET_MIB,
  requestedMaxConcurrent = 0,
): MemoryBounds {
  if (!Number.isInteger(budgetMib) || budgetMib <= BASELINE_RESERVE_MIB + 8)
    throw new ConfbootError(
      'invalid-argument',
      `memory budget must be a whole number of MiB above ${BASELINE_RESERVE_MIB + 8} (the service needs ~${BASELINE_RESERVE_MIB} MiB before any request), got ${budgetMib}`,
    );
  const maxMessageBytes = maxTicketRequestBytes();
  const share = ((budgetMib - BASELINE_RESERVE_MIB) * MIB) / 3;
  const perRequest = MESSAGE_COPIES * maxMessageBytes + PER_REQUEST_OVERHEAD_BYTES;
  const budgetRequests = Math.max(2, Math.floor(share / perRequest));
  // Requests held = running + queued (the queue is as long as the cap), so the cap is half of them.
  const capByBudget = Math.floor(budgetRequests / 2);
  const maxConcurrent =
    requestedMaxConcurrent > 0 ? Math.min(requestedMaxConcurrent, capByBudget) : capByBudget;
  const perConnection = MAX_STREAMS_PER_CONNECTION * maxMessageBytes + PER_CONNECTION_OVERHEAD_BYTES;
  return {
    budgetMib,
    maxMessageBytes,
    requestBytesInFlight: budgetRequests * maxMessageBytes,
    maxConcurrent,
    maxConnections: Math.max(1, Math.floor(share / perConnection)),
    maxHandshakes: Math.max(1, Math.floor(share / PER_HANDSHAKE_BYTES)),
    maxStreamsPerConnection: MAX_STREAMS_PER_CONNECTION,
    maxSessionMemoryMib: 1,
  };
}

/** Bytes held by requests in progress, bounded: a request that does not fit is refused at once. */
export class ByteBudget {
  private used = 0;

  constructor(readonly limit: number) {}

  /** Bytes currently held. */
  get inUse(): number {
    return this.used;
  }

  /** Takes `bytes`; returns the release function, or undefined when they do not fit. */
  tryAcquire(bytes: number): (() => void) | undefined {
    if (this.used + bytes > this.limit) return undefined;
    this.used += bytes;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used -= bytes;
    };
  }
}
