/**
 * Server side of attested TLS (adapter layer, src/adapters/grpc/atls): a TCP listener that runs
 * attested TLS on every accepted socket and hands over only sockets whose attestation passed.
 * Plaintext clients, TLS clients without attestation and peers that fail a check are closed here,
 * before any byte reaches grpc-js.
 *
 * Admission (admission.ts, docs/atls.md "Admission"): an unattested connection holds no scarce
 * capacity while the server waits for its bytes. Caps per source address and in total are checked
 * at accept, where a connection over a cap costs one close of the raw socket; each phase that waits
 * for the peer (ClientHello, TLS handshake, ATTESTATION frame with a bytes-per-second floor,
 * VERDICT) has its own deadline; only the verification of a fully received attestation runs under
 * one of a few slots. Drops are counted through {@link AttestedTlsListener.onDropped} and logged
 * as one summary line per interval.
 *
 * Once listening, the listener looks up the process's server TLS setup (its TLS identity and the
 * shared tls.Server for it, identity-pool.ts) ahead of the next handshake, so the first connection
 * does not wait for key and certificate generation; a lookup older than five minutes of clock time
 * is discarded and made again (the identity itself rotates hourly and on clock jumps).
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { isAttestationError, isConfbootError, messageOf } from '../../../ports/errors.js';
import type { Logger } from '../../../ports/logger.js';
import { Admission } from './admission.js';
import { type DropReason, isAdmissionDrop } from './admission-drop.js';
import type { AdmissionSettings } from './admission-settings.js';
import { attestSocket, type PreparedServerTls, prepareServerTls } from './connection.js';
import type { ConnectionBudget } from './connection-budget.js';
import type { AtlsOptions } from './exchange.js';
import type { AttestedPeer } from './peer-attestation.js';

/** Options of {@link AttestedTlsListener}: the exchange's, and the admission's settings. */
export interface AtlsListenerOptions extends AtlsOptions, AdmissionSettings {
  /** Logs drops and refusals, as one summary line per `dropLogIntervalMs`. */
  logger?: Logger;
  /**
   * Server TLS setup lookups kept ahead while listening (default 1; 0 = look it up during each
   * handshake). Every setup is the process's shared identity and tls.Server.
   */
  preparedTls?: number;
}

/** Prepared server TLS older than this (clock time) is discarded unused. */
export const PREPARED_TLS_MAX_AGE_MS = 5 * 60_000;

/** Called for every connection that passed attested TLS. */
export type AttestedConnectionHandler = (socket: TLSSocket, peer: AttestedPeer) => void;

/** Called for every connection refused, with the reason. */
export type RefusedConnectionHandler = (address: string, reason: Error) => void;

/** Called for every connection dropped by admission (a cap, a deadline, the peer closing). */
export type DroppedConnectionHandler = (address: string, reason: DropReason) => void;

/** Accepts TCP connections and hands over attested TLS sockets only. */
export class AttestedTlsListener {
  private readonly options: AtlsListenerOptions;
  private readonly onAttested: AttestedConnectionHandler;
  /** Caps, slots, deadlines and the drop summary (admission.ts). */
  readonly admission: Admission;
  private readonly pending = new Set<Socket>();
  /** Sockets the listener closed itself (evicted, or at close): their failure is not a new drop. */
  private readonly closedByUs = new WeakSet<Socket>();
  private readonly ready: PreparedServerTls[] = [];
  private readonly readyTarget: number;
  private filling = false;
  private readonly server: Server;
  /** Optional observer of refusals (tests, audit): connections whose attested TLS failed a check. */
  onRefused: RefusedConnectionHandler | undefined;
  /** Optional observer of admission drops (metrics). */
  onDropped: DroppedConnectionHandler | undefined;

  /** @throws Error for a cap, slot count or deadline out of range */
  constructor(options: AtlsListenerOptions, onAttested: AttestedConnectionHandler) {
    this.options = options;
    this.onAttested = onAttested;
    this.admission = new Admission(options, options.logger);
    this.readyTarget = options.preparedTls ?? 1;
    if (!Number.isInteger(this.readyTarget) || this.readyTarget < 0)
      throw new Error(`preparedTls must be an integer ≥ 0, got ${this.readyTarget}`);
    this.server = createServer({ noDelay: true }, (raw) => this.accept(raw));
  }

  /** Unattested connections held now (waiting for bytes, in the handshake, or being verified). */
  get pendingHandshakes(): number {
    return this.pending.size;
  }

  /** Source addresses holding unattested connections now. */
  get pendingSources(): number {
    return this.admission.sources;
  }

  /** Verifications running now. */
  get verifying(): number {
    return this.admission.verification.inUse;
  }

  /** Verifications waiting for a slot now. */
  get verificationsWaiting(): number {
    return this.admission.verification.waiting;
  }

  /** Own attestations being issued for inbound peers now. */
  get issuing(): number {
    return this.admission.issuance.inUse;
  }

  /** Connections in their handshake, those waiting for its start, and the pacing's cost and rate. */
  get handshakes(): Admission['handshakes'] {
    return this.admission.handshakes;
  }

  /** Server TLS setups prepared and not yet used. */
  get preparedTls(): number {
    return this.ready.length;
  }

  /** Drop summary lines logged so far. */
  get dropLogLines(): number {
    return this.admission.dropLogLines;
  }

  /** Listens on `host:port` (port 0 = any free port); resolves with the bound port. */
  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) =>
        reject(new Error(`attested TLS listen on ${host}:${port}: ${err.message}`));
      this.server.once('error', onError);
      this.server.listen({ port, host, backlog: 4096 }, () => {
        this.server.off('error', onError);
        const addr = this.server.address();
        resolve(addr !== null && typeof addr === 'object' ? addr.port : port);
        this.admission.start();
        this.refill();
      });
    });
  }

  /** Stops accepting and closes every connection still in its handshake. */
  close(): Promise<void> {
    for (const s of this.pending) {
      this.closedByUs.add(s);
      s.destroy();
    }
    this.pending.clear();
    this.ready.length = 0;
    this.admission.close();
    return new Promise((resolve) => {
      if (!this.server.listening) {
        resolve();
        return;
      }
      this.server.close(() => resolve());
    });
  }

  private drop(address: string, reason: DropReason): void {
    this.admission.count(reason, address);
    this.onDropped?.(address, reason);
  }

  private accept(raw: Socket): void {
    const address = `${raw.remoteAddress}:${raw.remotePort}`;
    raw.on('error', () => {});
    const admission = this.admission.admit(raw);
    if (!admission.admitted) {
      // Refused before any TLS: one close, no buffers, no identity.
      raw.destroy();
      this.drop(address, admission.reason);
      return;
    }
    if (admission.evicted !== undefined) {
      const victim = admission.evicted;
      this.closedByUs.add(victim);
      this.pending.delete(victim);
      this.drop(`${victim.remoteAddress}:${victim.remotePort}`, 'evicted');
      victim.destroy();
    }
    const budget = admission.budget;
    this.pending.add(raw);
    const release = () => {
      this.pending.delete(raw);
      budget.release();
    };
    raw.once('close', release);
    budget
      .clientHello()
      .then(() => this.admission.beginHandshake(budget))
      .then(
        (started) => {
          if (raw.destroyed || !this.pending.has(raw)) {
            if (started) this.admission.endHandshake();
            release();
            return;
          }
          if (!started) {
            // Waited the queue timeout: one close, no TLS.
            release();
            raw.destroy();
            this.drop(address, 'queue-timeout');
            return;
          }
          this.handshake(raw, address, budget, release);
        },
        (err: unknown) => {
          release();
          raw.destroy();
          if (this.closedByUs.has(raw)) return;
          this.drop(address, isAdmissionDrop(err) ? err.reason : 'peer-closed');
        },
      );
  }
  /** A prepared server TLS setup that is still fresh, if one is ready; starts a refill. */
  private takePrepared(): PreparedServerTls | undefined {
    const now = this.options.clock.now().getTime();
    let taken: PreparedServerTls | undefined;
    while (taken === undefined && this.ready.length > 0) {
      const p = this.ready.shift() as PreparedServerTls;
      if (Math.abs(now - p.createdAtMs) <= PREPARED_TLS_MAX_AGE_MS) taken = p;
    }
    this.refill();
    return taken;
  }

  /** Prepares server TLS setups one at a time in the background until the target is ready. */
  private refill(): void {
    if (this.filling || this.readyTarget === 0 || !this.server.listening) return;
    if (this.ready.length >= this.readyTarget) return;
    this.filling = true;
    const fill = async () => {
      while (this.server.listening && this.ready.length < this.readyTarget) {
        const p = await prepareServerTls(this.options);
        if (!this.server.listening) return;
        this.ready.push(p);
        // Let handshakes and calls run between two preparations.
        await new Promise((r) => setImmediate(r));
      }
    };
    fill()
      .catch((err: unknown) =>
        this.options.logger?.warn('Preparing attested TLS identities failed', {
          reason: messageOf(err),
        }),
      )
      .finally(() => {
        this.filling = false;
      });
  }

  private handshake(raw: Socket, address: string, budget: ConnectionBudget, release: () => void): void {
    const done = () => {
      this.admission.endHandshake();
      release();
    };
    attestSocket(raw, 'server', this.options, { budget, ...this.preparedExtra() }).then(
      ({ socket, peer }) => {
        done();
        if (!this.server.listening) {
          socket.destroy();
          return;
        }
        this.onAttested(socket, peer);
      },
      (err: unknown) => {
        done();
        if (this.closedByUs.has(raw)) return;
        if (isAdmissionDrop(err)) {
          this.drop(address, err.reason);
          return;
        }
        const error = err instanceof Error ? err : new Error(String(err));
        const fields: Record<string, unknown> = { peer: address, reason: error.message };
        if (isAttestationError(err)) fields.check = err.check;
        else if (isConfbootError(err)) fields.code = err.code;
        this.options.logger?.debug('Refused attested TLS connection', fields);
        this.admission.count(isAttestationError(err) ? `refused:${err.check}` : 'refused', address);
        this.onRefused?.(address, error);
      },
    );
  }

  private preparedExtra(): { prepared?: PreparedServerTls } {
    const prepared = this.takePrepared();
    return prepared === undefined ? {} : { prepared };
  }
}
