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
import { peerHost } from '../../../ports/peer-address.js';
import {
  AdmissionDrop,
  ConnectionCaps,
  DEFAULT_MAX_CONCURRENT_VERIFICATIONS,
  DEFAULT_MAX_PER_SOURCE,
  DEFAULT_MAX_UNATTESTED,
  type DropReason,
  DropSummary,
  isAdmissionDrop,
  resolveDeadlines,
  Slots,
} from './admission.js';
import { HandshakeCostSampler, HandshakeSizing, type HandshakeSizingTunables } from './admission-sizing.js';
import { attestSocket, type PreparedServerTls, prepareServerTls } from './connection.js';
import type { AtlsOptions, AttestedPeer } from './exchange.js';

/** Options of {@link AttestedTlsListener}. */
export interface AtlsListenerOptions extends AtlsOptions {
  /** Logs drops and refusals, as one summary line per `dropLogIntervalMs`. */
  logger?: Logger;
  /** Unattested connections in total (default {@link DEFAULT_MAX_UNATTESTED}). */
  maxPendingHandshakes?: number;
  /** Unattested connections per source address (default {@link DEFAULT_MAX_PER_SOURCE}). */
  maxPendingPerSource?: number;
  /**
   * Attestation verifications run at once (CPU work; default
   * {@link DEFAULT_MAX_CONCURRENT_VERIFICATIONS}; 0 = no limit). Waiting for the peer holds none.
   */
  maxConcurrentVerifications?: number;
  /**
   * Our own attestations (TPM quotes) issued at once for inbound peers, each only after the peer's
   * ATTESTATION frame arrived (default {@link DEFAULT_MAX_CONCURRENT_ISSUANCE}).
   */
  maxConcurrentIssuance?: number;
  /**
   * Inbound peers waiting for one of those quotes (default {@link DEFAULT_MAX_QUEUED_ISSUANCE}); one
   * more is refused at once (check `issuer`, recoverable) instead of queueing on the TPM.
   */
  maxQueuedIssuance?: number;
  /** At most one drop summary line per this interval (default 10 s). */
  dropLogIntervalMs?: number;
  /**
   * Server TLS setup lookups kept ahead while listening (default 1; 0 = look it up during each
   * handshake). Every setup is the process's shared identity and tls.Server.
   */
  preparedTls?: number;
  /**
   * Size the connections in their handshake at once from the measured handshake cost
   * (admission-sizing.ts; true or the sizing's tunables); default false: only the fixed caps.
   */
  sizedHandshakes?: boolean | HandshakeSizingTunables;
}

/** Default quotes issued at once for inbound peers: one, so the node's own quotes wait for at most one. */
export const DEFAULT_MAX_CONCURRENT_ISSUANCE = 1;
/** Default inbound peers waiting for a quote. */
export const DEFAULT_MAX_QUEUED_ISSUANCE = 2;

/** Prepared server TLS older than this (clock time) is discarded unused. */
export const PREPARED_TLS_MAX_AGE_MS = 5 * 60_000;

/** TLS record type of a handshake record (the ClientHello arrives in one). */
const TLS_HANDSHAKE_RECORD = 0x16;

/** Called for every connection that passed attested TLS. */
export type AttestedConnectionHandler = (socket: TLSSocket, peer: AttestedPeer) => void;

/** Called for every connection refused, with the reason. */
export type RefusedConnectionHandler = (address: string, reason: Error) => void;

/** Called for every connection dropped by admission (a cap, a deadline, the peer closing). */
export type DroppedConnectionHandler = (address: string, reason: DropReason) => void;

/**
 * Waits until `raw` holds a complete first TLS record (the ClientHello) without consuming it (the
 * bytes are given back to the socket for TLS); resolves at once for a first byte that cannot start
 * TLS (the handshake then refuses it). Rejects with an {@link AdmissionDrop} on the deadline or
 * when the peer closes.
 *
 * The bytes read so far are kept here and given back (`unshift`) once, when the record is complete:
 * giving an incomplete record back from a 'readable' handler would make the stream emit 'readable'
 * again on the next tick, for ever, and starve the event loop (a peer sending three bytes would stop
 * the whole process).
 */
function awaitClientHello(raw: Socket, ms: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    const cleanup = () => {
      clearTimeout(timer);
      raw.off('readable', check);
      raw.off('close', onClose);
      raw.off('end', onClose);
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new AdmissionDrop('client-hello-timeout', `no complete ClientHello within ${ms} ms`));
    }, ms);
    timer.unref();
    const onClose = () => {
      cleanup();
      reject(new AdmissionDrop('peer-closed', 'connection closed before its ClientHello'));
    };
    const check = () => {
      for (let chunk = raw.read() as Buffer | null; chunk !== null; chunk = raw.read() as Buffer | null) {
        chunks.push(chunk);
        length += chunk.length;
      }
      if (length === 0) return;
      const buffered = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, length);
      const complete =
        buffered[0] !== TLS_HANDSHAKE_RECORD ||
        (buffered.length >= 5 && buffered.length >= 5 + buffered.readUInt16BE(3));
      if (!complete) return;
      cleanup();
      raw.unshift(buffered);
      resolve();
    };
    raw.on('readable', check);
    raw.once('close', onClose);
    raw.once('end', onClose);
  });
}

/** Accepts TCP connections and hands over attested TLS sockets only. */
export class AttestedTlsListener {
  private readonly options: AtlsListenerOptions;
  private readonly onAttested: AttestedConnectionHandler;
  private readonly caps: ConnectionCaps;
  private readonly pending = new Set<Socket>();
  /** Sockets the listener closed itself (evicted, or at close): their failure is not a new drop. */
  private readonly closedByUs = new WeakSet<Socket>();
  private readonly slots: Slots;
  private readonly issuance: Slots;
  private readonly clientHelloMs: number;
  private readonly summary: DropSummary;
  private readonly ready: PreparedServerTls[] = [];
  private readonly readyTarget: number;
  private filling = false;
  private readonly server: Server;
  /** Handshake sizing (admission-sizing.ts): connections past their ClientHello and not yet done. */
  private readonly sizing: HandshakeSizing | undefined;
  private readonly sampler: HandshakeCostSampler | undefined;
  private handshaking = 0;
  /** Optional observer of refusals (tests, audit): connections whose attested TLS failed a check. */
  onRefused: RefusedConnectionHandler | undefined;
  /** Optional observer of admission drops (metrics). */
  onDropped: DroppedConnectionHandler | undefined;

  /** @throws Error for a cap, slot count or deadline out of range */
  constructor(options: AtlsListenerOptions, onAttested: AttestedConnectionHandler) {
    this.options = options;
    this.onAttested = onAttested;
    this.caps = new ConnectionCaps(
      options.maxPendingPerSource ?? DEFAULT_MAX_PER_SOURCE,
      options.maxPendingHandshakes ?? DEFAULT_MAX_UNATTESTED,
    );
    this.slots = new Slots(options.maxConcurrentVerifications ?? DEFAULT_MAX_CONCURRENT_VERIFICATIONS);
    const maxIssuance = options.maxConcurrentIssuance ?? DEFAULT_MAX_CONCURRENT_ISSUANCE;
    if (!Number.isInteger(maxIssuance) || maxIssuance < 1)
      throw new Error(`concurrent issuance must be an integer ≥ 1, got ${maxIssuance}`);
    this.issuance = new Slots(
      maxIssuance,
      options.maxQueuedIssuance ?? DEFAULT_MAX_QUEUED_ISSUANCE,
      'attestations for inbound peers',
    );
    const deadlines = resolveDeadlines(options.deadlines);
    this.clientHelloMs = deadlines.clientHelloMs;
    const sized = options.sizedHandshakes ?? false;
    if (sized !== false) {
      this.sizing = new HandshakeSizing({
        ...(sized === true ? {} : sized),
        tlsHandshakeMs: deadlines.tlsHandshakeMs,
        maxInProgress: this.caps.maxTotal,
      });
      this.sampler = new HandshakeCostSampler(this.sizing);
    }
    this.summary = new DropSummary({
      logger: options.logger,
      ...(options.dropLogIntervalMs !== undefined ? { intervalMs: options.dropLogIntervalMs } : {}),
    });
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
    return this.caps.sources;
  }

  /** Verifications running now. */
  get verifying(): number {
    return this.slots.inUse;
  }

  /** Verifications waiting for a slot now. */
  get verificationsWaiting(): number {
    return this.slots.waiting;
  }

  /** Own attestations being issued for inbound peers now. */
  get issuing(): number {
    return this.issuance.inUse;
  }

  /** Connections in their TLS handshake or attestation exchange now, and the sized cap on them. */
  get handshakes(): { inProgress: number; cap: number; costMs: number } {
    return {
      inProgress: this.handshaking,
      cap: this.sizing?.cap ?? this.caps.maxTotal,
      costMs: this.sizing?.costMs ?? Number.NaN,
    };
  }

  /** Server TLS setups prepared and not yet used. */
  get preparedTls(): number {
    return this.ready.length;
  }

  /** Drop summary lines logged so far. */
  get dropLogLines(): number {
    return this.summary.lines;
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
        this.sampler?.start();
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
    this.caps.clear();
    this.ready.length = 0;
    this.sampler?.stop();
    this.summary.flush();
    return new Promise((resolve) => {
      if (!this.server.listening) {
        resolve();
        return;
      }
      this.server.close(() => resolve());
    });
  }

  private drop(address: string, reason: DropReason): void {
    this.summary.add(reason, peerHost(address));
    this.onDropped?.(address, reason);
  }

  private accept(raw: Socket): void {
    const address = `${raw.remoteAddress}:${raw.remotePort}`;
    const source = raw.remoteAddress ?? '';
    raw.on('error', () => {});
    const admission = this.caps.admit(source, raw);
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
    this.pending.add(raw);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.pending.delete(raw);
      this.caps.release(source, raw);
    };
    raw.once('close', release);
    awaitClientHello(raw, this.clientHelloMs).then(
      () => {
        if (raw.destroyed || !this.pending.has(raw)) {
          release();
          return;
        }
        if (this.sizing !== undefined && this.handshaking >= this.sizing.cap) {
          // More handshakes than can finish before their deadline: one close, no TLS.
          release();
          raw.destroy();
          this.drop(address, 'global-cap');
          return;
        }
        this.handshake(raw, address, release);
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

  private handshake(raw: Socket, address: string, release: () => void): void {
    this.handshaking++;
    const done = () => {
      this.handshaking--;
      this.sampler?.finished();
    };
    attestSocket(
      raw,
      'server',
      { ...this.options, verificationSlots: this.slots, issuanceSlots: this.issuance },
      this.takePrepared(),
    ).then(
      ({ socket, peer }) => {
        done();
        release();
        if (!this.server.listening) {
          socket.destroy();
          return;
        }
        this.onAttested(socket, peer);
      },
      (err: unknown) => {
        done();
        release();
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
        this.summary.add(isAttestationError(err) ? `refused:${err.check}` : 'refused', peerHost(address));
        this.onRefused?.(address, error);
      },
    );
  }
}
