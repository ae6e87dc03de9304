/**
 * The admission budget of one accepted attested TLS connection (adapter layer,
 * src/adapters/grpc/atls): the server's {@link HandshakeBudget}. It holds the connection's place
 * under the listener's caps, arms one phase deadline at a time (ClientHello, TLS handshake,
 * ATTESTATION frame with a bytes-per-second floor, VERDICT) plus the bound on the whole handshake,
 * and runs the scarce work (our quote, the verification, room for the attested connection) under the
 * listener's slots. Expiry aborts its signal with an {@link AdmissionDrop} naming the phase. The
 * listener's admission (admission.ts) makes one per admitted connection.
 */
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { AdmissionDrop, type DropReason } from './admission-drop.js';
import type { Slots } from './admission-limits.js';
import type { AtlsDeadlines } from './admission-settings.js';
import type { HandshakeBudget } from './exchange.js';
import { FRAME_ATTESTATION, type Frame, type FrameReader } from './protocol.js';

/** TLS record type of a handshake record (the ClientHello arrives in one). */
const TLS_HANDSHAKE_RECORD = 0x16;

/** What a budget takes from the listener's admission: deadlines, slots and the attested-source cap. */
export interface BudgetScope {
  readonly deadlines: AtlsDeadlines;
  readonly handshakeTimeoutMs: number;
  readonly verification: Slots;
  readonly issuance: Slots;
  readonly connections: Slots | undefined;
  /**
   * Counts `raw` under the cap on attested connections per source until the returned release;
   * throws an {@link AdmissionDrop} (`source-cap`) when its source holds as many already.
   */
  holdSource(raw: Socket): () => void;
}

/**
 * The admission budget of one accepted connection: its caps entry, its phase deadlines (one armed
 * at a time) and the overall handshake bound, and the slots its work runs under. Expiry aborts
 * {@link signal} with an {@link AdmissionDrop} naming the phase.
 */
export class ConnectionBudget implements HandshakeBudget {
  private readonly controller = new AbortController();
  private phaseTimer: ReturnType<typeof setTimeout> | undefined;
  private overallTimer: ReturnType<typeof setTimeout> | undefined;
  private released = false;
  private leaveTls: (() => void) | undefined;

  constructor(
    private readonly admission: BudgetScope,
    private readonly raw: Socket,
    private readonly forget: () => void,
  ) {}

  /** Aborts with the reason the connection is dropped or refused. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Gives the connection's place under the caps back (attested, dropped or closed); idempotent. */
  release(): void {
    this.tlsDone();
    if (this.released) return;
    this.released = true;
    this.forget();
  }

  /** Holds a place under the cap on TLS handshakes until the TLS phase ends or the connection goes. */
  holdTlsPlace(leave: () => void): void {
    this.leaveTls = leave;
  }

  /** Gives the TLS handshake place back (idempotent). */
  private tlsDone(): void {
    const leave = this.leaveTls;
    this.leaveTls = undefined;
    leave?.();
  }

  /**
   * Waits until the socket holds a complete first TLS record (the ClientHello) without consuming it
   * (the bytes are given back to the socket for TLS); resolves at once for a first byte that cannot
   * start TLS (the handshake then refuses it). Rejects with an {@link AdmissionDrop} on the deadline
   * or when the peer closes.
   *
   * The bytes read so far are kept here and given back (`unshift`) once, when the record is
   * complete: giving an incomplete record back from a 'readable' handler would make the stream emit
   * 'readable' again on the next tick, for ever, and starve the event loop (a peer sending three
   * bytes would stop the whole process).
   */
  clientHello(): Promise<void> {
    const raw = this.raw;
    const ms = this.admission.deadlines.clientHelloMs;
    return new Promise<void>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let length = 0;
      const cleanup = () => {
        this.clearPhase();
        raw.off('readable', check);
        raw.off('close', onClose);
        raw.off('end', onClose);
      };
      this.armPhase('client-hello-timeout', ms, `no complete ClientHello within ${ms} ms`, (drop) => {
        cleanup();
        reject(drop);
      });
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
        // Always a copy: a chunk read from the socket is a view into a 64 KiB read buffer, which a
        // connection waiting for its handshake would otherwise keep alive.
        const buffered = Buffer.concat(chunks, length);
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

  /** Starts the bound on the whole handshake (TLS and attestation exchange). */
  begin(): void {
    const ms = this.admission.handshakeTimeoutMs;
    this.overallTimer = setTimeout(() => {
      this.abort(
        new AdmissionDrop('handshake-timeout', `attested TLS handshake not completed within ${ms} ms`),
      );
    }, ms);
    this.overallTimer.unref();
  }

  async tlsHandshake<T>(run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const ms = this.admission.deadlines.tlsHandshakeMs;
    this.armPhase('tls-handshake-timeout', ms, `no completed TLS handshake within ${ms} ms`);
    try {
      return await run(this.signal);
    } finally {
      this.clearPhase();
      this.tlsDone();
    }
  }

  async firstFrame(reader: FrameReader): Promise<Frame> {
    const { attestationMs, attestationMinBytesPerSecond } = this.admission.deadlines;
    const started = Date.now();
    const what = 'complete ATTESTATION frame';
    this.armPhase(
      'attestation-timeout',
      attestationMs,
      `no ${what} from the peer within ${attestationMs} ms`,
    );
    try {
      return await reader.next((type, length) => {
        if (type !== FRAME_ATTESTATION) return;
        const ms = Math.max(
          1,
          attestationMs + (length * 1000) / attestationMinBytesPerSecond - (Date.now() - started),
        );
        const message = `no ${what} of ${length} bytes from the peer within ${Math.round(ms)} ms`;
        this.armPhase('attestation-timeout', ms, message);
      });
    } finally {
      this.clearPhase();
    }
  }

  async verdict(reader: FrameReader): Promise<Frame> {
    const ms = this.admission.deadlines.verdictMs;
    this.armPhase('verdict-timeout', ms, `no VERDICT from the peer within ${ms} ms`);
    try {
      return await reader.next();
    } finally {
      this.clearPhase();
    }
  }

  async issuing<T>(issue: () => Promise<T>): Promise<T> {
    const release = await this.admission.issuance.acquire(this.signal);
    const issued = issue();
    // The slot covers the issuer's work itself: it is given back when the issuer settles (an
    // aborted quote still queued on the TPM is dropped there at once).
    void issued.then(release, release);
    return issued;
  }

  async holdConnection(socket: TLSSocket): Promise<void> {
    const leaveSource = this.admission.holdSource(this.raw);
    const slots = this.admission.connections;
    let releaseSlot: () => void = () => {};
    try {
      if (slots !== undefined) releaseSlot = await slots.acquire(this.signal);
    } catch (err) {
      leaveSource();
      throw err;
    }
    const release = () => {
      leaveSource();
      releaseSlot();
    };
    if (socket.destroyed) release();
    else socket.once('close', release);
  }

  async verifying<T>(verify: () => Promise<T>): Promise<T> {
    const release = await this.admission.verification.acquire(this.signal);
    try {
      return await verify();
    } finally {
      release();
    }
  }

  peerClosed(message: string): AdmissionDrop {
    return new AdmissionDrop('peer-closed', message);
  }

  abort(reason: Error): void {
    this.controller.abort(reason);
  }

  end(): void {
    this.clearPhase();
    if (this.overallTimer !== undefined) clearTimeout(this.overallTimer);
    this.overallTimer = undefined;
  }

  /** Replaces the running phase deadline with `ms` from now; expiry aborts (or calls `onExpire`). */
  private armPhase(
    reason: DropReason,
    ms: number,
    message: string,
    onExpire: (drop: AdmissionDrop) => void = (drop) => this.abort(drop),
  ): void {
    this.clearPhase();
    this.phaseTimer = setTimeout(() => {
      this.phaseTimer = undefined;
      onExpire(new AdmissionDrop(reason, message));
    }, ms);
    this.phaseTimer.unref();
  }

  private clearPhase(): void {
    if (this.phaseTimer !== undefined) clearTimeout(this.phaseTimer);
    this.phaseTimer = undefined;
  }
}
