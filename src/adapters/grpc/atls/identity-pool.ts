/**
 * One-use TLS identities made ahead of time (adapter layer, src/adapters/grpc/atls): the client
 * side's counterpart of the listener's prepared server TLS. A pool keeps a few fresh identities
 * (ECDSA P-256 key + self-signed certificate, {@link createTlsIdentity}) ready, made one at a time
 * in the background, so a connection does not wait for key and certificate generation. Every
 * identity is handed out once and then forgotten (never used for two connections), and one older
 * than {@link PREPARED_IDENTITY_MAX_AGE_MS} of clock time is discarded unused.
 */
import type { Clock } from '../../../ports/clock.js';
import type { Logger } from '../../../ports/logger.js';
import { createTlsIdentity, type TlsIdentity } from './certificate.js';

/** A prepared identity older than this (clock time) is discarded unused. */
export const PREPARED_IDENTITY_MAX_AGE_MS = 5 * 60_000;

interface Prepared {
  identity: TlsIdentity;
  createdAtMs: number;
}

/** Options of {@link TlsIdentityPool}. */
export interface TlsIdentityPoolOptions {
  clock: Clock;
  /** Identities kept ready (default 2; 0 = none, {@link TlsIdentityPool.take} always misses). */
  size?: number;
  /** Logs a failed background preparation (the next take makes its identity inline instead). */
  logger?: Logger;
  /** Makes one identity (default {@link createTlsIdentity}); for tests. */
  create?: (clock: Clock) => Promise<TlsIdentity>;
}

/** A small pool of one-use TLS identities refilled in the background. */
export class TlsIdentityPool {
  private readonly clock: Clock;
  private readonly size: number;
  private readonly logger: Logger | undefined;
  private readonly create: (clock: Clock) => Promise<TlsIdentity>;
  private readonly ready: Prepared[] = [];
  private filling = false;
  private closed = false;

  /** Throws when `size` is not an integer ≥ 0. Starts filling at once. */
  constructor(options: TlsIdentityPoolOptions) {
    this.clock = options.clock;
    this.size = options.size ?? 2;
    if (!Number.isInteger(this.size) || this.size < 0)
      throw new Error(`TLS identity pool size must be an integer ≥ 0, got ${this.size}`);
    this.logger = options.logger;
    this.create = options.create ?? createTlsIdentity;
    this.refill();
  }

  /** Identities ready and not yet handed out. */
  get available(): number {
    return this.ready.length;
  }

  /**
   * A fresh identity for one connection, removed from the pool (the caller must not use it for a
   * second connection), or undefined when none is ready; starts a refill either way.
   */
  take(): TlsIdentity | undefined {
    const now = this.clock.now().getTime();
    let taken: TlsIdentity | undefined;
    while (taken === undefined && this.ready.length > 0) {
      const p = this.ready.shift() as Prepared;
      if (Math.abs(now - p.createdAtMs) <= PREPARED_IDENTITY_MAX_AGE_MS) taken = p.identity;
    }
    this.refill();
    return taken;
  }

  /** A prepared identity if one is ready, else a new one made now. */
  async takeOrCreate(): Promise<TlsIdentity> {
    return this.take() ?? (await this.create(this.clock));
  }

  /** Drops every prepared identity and makes no more. */
  close(): void {
    this.closed = true;
    this.ready.length = 0;
  }

  /** Prepares identities one at a time in the background until the pool is full. */
  private refill(): void {
    if (this.filling || this.closed || this.ready.length >= this.size) return;
    this.filling = true;
    const fill = async () => {
      while (!this.closed && this.ready.length < this.size) {
        const createdAtMs = this.clock.now().getTime();
        const identity = await this.create(this.clock);
        if (this.closed) return;
        this.ready.push({ identity, createdAtMs });
        // Let connections and calls run between two preparations.
        await new Promise((r) => setImmediate(r));
      }
    };
    fill()
      .catch((err: unknown) =>
        this.logger?.warn('Preparing attested TLS client identities failed', {
          reason: err instanceof Error ? err.message : String(err),
        }),
      )
      .finally(() => {
        this.filling = false;
      });
  }
}
