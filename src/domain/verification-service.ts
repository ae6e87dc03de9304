/**
 * The verification service of a node (domain): after the node is bootstrapped it keeps answering a
 * caller's fresh nonce with an attestation document from the node's own issuer, so anyone can check
 * the node live (`confboot verify`). The document binds the caller's nonce and the fixed user data
 * {@link VERIFY_SERVICE_USER_DATA} (for vTPM variants extraData = SHA256("VerifyService"‖nonce)),
 * never a TLS key: a document from here can therefore never pass as an attested-TLS document, whose
 * user data must be the SHA-256 of the attester's TLS key.
 *
 * Callers are not authenticated and a quote is expensive (a TPM quote takes the TPM for tens of ms,
 * a cloud CVM report longer), so every request is bounded: at most `maxQuotes` documents are issued
 * at once, at most `maxWaiting` requests wait for their turn, one source (an IPv4 address or an IPv6
 * /64) has at most `maxPerSource` requests waiting or running, and each request has a deadline from
 * its arrival (waiting and issuing). A request over a bound is refused at once
 * (`resource-exhausted`), never queued.
 */
import type { Clock } from '../ports/clock.js';
import { ConfbootError, messageOf } from '../ports/errors.js';
import type { Issuer } from '../ports/issuer.js';
import { callerIp, sourceKey } from '../ports/peer-address.js';
import type { CallOptions } from '../ports/types.js';
import type { NonceAttestation, NonceAttester } from '../ports/verification.js';
import { raceAbort } from './waits.js';

/** The user data every document of the verification service binds (upstream's, ASCII). */
export const VERIFY_SERVICE_USER_DATA: Uint8Array = new TextEncoder().encode('VerifyService');

/** Shortest nonce accepted, in bytes: the caller's randomness must make a replay guess hopeless. */
export const MIN_NONCE_BYTES = 32;
/** Longest nonce accepted, in bytes. */
export const MAX_NONCE_BYTES = 64;

/** Bounds of a {@link VerificationService}; every field has a default. */
export interface VerificationServiceOptions {
  /** Documents issued at once (default {@link DEFAULT_MAX_QUOTES}). */
  maxQuotes?: number;
  /** Requests waiting for their turn at once (default {@link DEFAULT_MAX_WAITING_QUOTES}). */
  maxWaiting?: number;
  /** Requests one source may have waiting or running (default {@link DEFAULT_MAX_QUOTES_PER_SOURCE}). */
  maxPerSource?: number;
  /** Deadline of one request from its arrival, in ms (default {@link DEFAULT_QUOTE_DEADLINE_MS}). */
  requestTimeoutMs?: number;
}

/** Default documents issued at once. */
export const DEFAULT_MAX_QUOTES = 1;
/** Default requests waiting for their turn. */
export const DEFAULT_MAX_WAITING_QUOTES = 4;
/** Default requests of one source waiting or running. */
export const DEFAULT_MAX_QUOTES_PER_SOURCE = 1;
/** Default deadline of one request, in ms. */
export const DEFAULT_QUOTE_DEADLINE_MS = 10_000;

interface Waiter {
  start: () => void;
}

/** Answers nonces with bound documents under the bounds of the module comment. */
export class VerificationService implements NonceAttester {
  readonly maxQuotes: number;
  readonly maxWaiting: number;
  readonly maxPerSource: number;
  readonly requestTimeoutMs: number;
  #running = 0;
  readonly #waiting: Waiter[] = [];
  readonly #perSource = new Map<string, number>();

  /** Throws `invalid-argument` for bounds that are not integers ≥ 1 (waiting ≥ 0). */
  constructor(
    private readonly issuer: Pick<Issuer, 'variant' | 'oid' | 'issue'>,
    private readonly clock: Pick<Clock, 'sleep'>,
    options: VerificationServiceOptions = {},
  ) {
    this.maxQuotes = options.maxQuotes ?? DEFAULT_MAX_QUOTES;
    this.maxWaiting = options.maxWaiting ?? DEFAULT_MAX_WAITING_QUOTES;
    this.maxPerSource = options.maxPerSource ?? DEFAULT_MAX_QUOTES_PER_SOURCE;
    this.requestTimeoutMs = options.requestTimeoutMs ?? DEFAULT_QUOTE_DEADLINE_MS;
    for (const [name, v, min] of [
      ['documents issued at once', this.maxQuotes, 1],
      ['waiting requests', this.maxWaiting, 0],
      ['requests per source', this.maxPerSource, 1],
      ['request deadline (ms)', this.requestTimeoutMs, 1],
    ] as const)
      if (!Number.isInteger(v) || v < min)
        throw new ConfbootError(
          'invalid-argument',
          `verification service: ${name} must be an integer ≥ ${min}, got ${v}`,
        );
  }

  /** Documents being issued now. */
  get running(): number {
    return this.#running;
  }

  /** Requests waiting for their turn now. */
  get waiting(): number {
    return this.#waiting.length;
  }

  async attest(nonce: Uint8Array, options: CallOptions = {}): Promise<NonceAttestation> {
    if (nonce.length < MIN_NONCE_BYTES || nonce.length > MAX_NONCE_BYTES)
      throw new ConfbootError(
        'invalid-argument',
        `the nonce must be ${MIN_NONCE_BYTES} to ${MAX_NONCE_BYTES} bytes, got ${nonce.length}`,
      );
    const peer = options.peerAddress ?? 'unknown';
    const source = sourceKey(callerIp(peer) ?? peer);
    const held = this.#perSource.get(source) ?? 0;
    if (held >= this.maxPerSource)
      throw new ConfbootError(
        'resource-exhausted',
        `${source} already has ${held} request(s) in progress (at most ${this.maxPerSource}); retry later`,
        { reason: 'per-source' },
      );
    if (this.#running >= this.maxQuotes && this.#waiting.length >= this.maxWaiting)
      throw new ConfbootError(
        'resource-exhausted',
        `the node is issuing ${this.#running} document(s) with ${this.#waiting.length} waiting; retry later`,
        { reason: 'busy' },
      );
    this.#perSource.set(source, held + 1);
    const deadline = new AbortController();
    const stopTimer = new AbortController();
    const onCallerAbort = () => deadline.abort(callerGone());
    options.signal?.addEventListener('abort', onCallerAbort, { once: true });
    if (options.signal?.aborted) deadline.abort(callerGone());
    this.clock.sleep(this.requestTimeoutMs, stopTimer.signal).then(
      () => deadline.abort(deadlinePassed(this.requestTimeoutMs)),
      () => {},
    );
    try {
      await this.#turn(deadline.signal);
      return await this.#issue(nonce, deadline.signal);
    } finally {
      stopTimer.abort();
      options.signal?.removeEventListener('abort', onCallerAbort);
      const left = (this.#perSource.get(source) ?? 1) - 1;
      if (left > 0) this.#perSource.set(source, left);
      else this.#perSource.delete(source);
    }
  }

  /** Issues under a held slot; the slot is given back when the issuer settles, even after an abort. */
  async #issue(nonce: Uint8Array, signal: AbortSignal): Promise<NonceAttestation> {
    const issued = this.issuer.issue(VERIFY_SERVICE_USER_DATA, nonce, { signal });
    void issued.then(
      () => this.#next(),
      () => this.#next(),
    );
    let document: Uint8Array;
    try {
      document = await raceAbort(issued, signal);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      throw new ConfbootError('internal', `issuing an attestation document: ${messageOf(err)}`, {
        cause: err,
      });
    }
    return { variant: this.issuer.variant, oid: this.issuer.oid, document };
  }

  /** Resolves once a slot is held; rejects with the signal's reason when it aborts first. */
  #turn(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.#running < this.maxQuotes) {
      this.#running++;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        start: () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        const i = this.#waiting.indexOf(waiter);
        if (i >= 0) this.#waiting.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiting.push(waiter);
    });
  }

  /** Hands the finished slot to the longest waiter, or frees it. */
  #next(): void {
    const next = this.#waiting.shift();
    if (next === undefined) this.#running--;
    else next.start();
  }
}

function callerGone(): ConfbootError {
  return new ConfbootError('unavailable', 'the caller went away before its document was issued');
}

function deadlinePassed(ms: number): ConfbootError {
  return new ConfbootError('deadline-exceeded', `no attestation document within ${ms} ms`);
}
