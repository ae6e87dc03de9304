/**
 * The attestation exchange of attested TLS (adapter layer, src/adapters/grpc/atls): runs on an
 * established TLS 1.3 socket, symmetric for client and server. Each side sends one ATTESTATION
 * frame (its document, or "none"), verifies the peer's frame if it has validators, answers with a
 * VERDICT frame, and waits for the peer's verdict. Only when both verdicts accept is the socket
 * handed to grpc-js. See docs/atls.md.
 */
import type { TLSSocket } from 'node:tls';
import type { Clock } from '../../../ports/clock.js';
import {
  AttestationError,
  ConfbootError,
  isAttestationError,
  isConfbootError,
  messageOf,
} from '../../../ports/errors.js';
import type { Issuer } from '../../../ports/issuer.js';
import type { Validator } from '../../../ports/validator.js';
import type { TlsIdentity } from './certificate.js';
import { type PeerAttestation, type RefusedEvidence, verifyPeerAttestation } from './peer-attestation.js';
import {
  type AttestationFrame,
  DEFAULT_MAX_DOCUMENT_BYTES,
  EXPORTER_LABEL,
  encodeAttestationFrame,
  encodeVerdictFrame,
  FRAME_VERDICT,
  type Frame,
  FrameReader,
  NONCE_BYTES,
  protocolError,
  type VerdictFrame,
} from './protocol.js';
import { peerRefusalReason } from './refusal.js';

/** Which end of the TLS connection we are. */
export type TlsRole = 'client' | 'server';

/** Default bound on TLS handshake plus attestation exchange (upstream's validation timeout). */
export const DEFAULT_HANDSHAKE_TIMEOUT_MS = 30_000;

/** Configuration of one end of attested TLS. */
export interface AtlsOptions {
  /** Attest ourselves with this issuer; without one we send "no attestation". */
  issuer?: Issuer;
  /** Verify the peer with one of these validators (matched by OID); empty = do not verify the peer. */
  validators?: readonly Validator[];
  /** Time source for certificate validity. */
  clock: Clock;
  /** Bound on the TLS handshake plus the attestation exchange, in ms (default 30 000). */
  handshakeTimeoutMs?: number;
  /** Largest attestation document accepted from the peer (default and maximum sensible: 1 MiB). */
  maxDocumentBytes?: number;
  /**
   * Called with the evidence of every attestation frame this end's validators refused (the join
   * service keeps it for dry runs of new policies). Not called for frames refused before a
   * validator ran on them, such as an unknown variant OID.
   */
  onEvidenceRefused?: (evidence: RefusedEvidence) => void;
  /**
   * Names the variant of an OID (the composition's variant registry), for refusals of an OID no
   * validator accepts; without it they name the OID alone.
   */
  variantOfOid?: (oid: string) => string | undefined;
}

/**
 * What bounds one end's attestation exchange: the connection's abort signal, the waits for the
 * peer's frames, and the scarce work (our quote, the verification, room for the connection). The
 * server's comes from its admission (admission.ts), the client's from its own deadlines
 * (client-deadline.ts). Every method rejects with the signal's reason once it aborts.
 */
export interface ExchangeBudget {
  /** Aborts when the connection is given up (a deadline, the peer closing). */
  readonly signal: AbortSignal;
  /** Reads the peer's first frame (its ATTESTATION frame, or a refusal). */
  firstFrame(reader: FrameReader): Promise<Frame>;
  /** Reads the peer's VERDICT, after ours was sent. */
  verdict(reader: FrameReader): Promise<Frame>;
  /** Runs our own attestation (its promise settles with the issuer's work; no abort race). */
  issuing<T>(issue: () => Promise<T>): Promise<T>;
  /** Waits for room to keep `socket` open once attested (held until it closes). */
  holdConnection(socket: TLSSocket): Promise<void>;
  /** Runs the verification of the peer's attestation. */
  verifying<T>(verify: () => Promise<T>): Promise<T>;
  /** The error for a peer that went away before it was attested. */
  peerClosed(message: string): Error;
}

/** An {@link ExchangeBudget} that also bounds the TLS handshake and the whole (connection.ts). */
export interface HandshakeBudget extends ExchangeBudget {
  /** Starts the bound on the whole handshake (TLS and attestation exchange). */
  begin(): void;
  /** Runs the TLS handshake within its own bound. */
  tlsHandshake<T>(run: (signal: AbortSignal) => Promise<T>): Promise<T>;
  /** Gives the connection up with `reason` (aborts {@link ExchangeBudget.signal}). */
  abort(reason: Error): void;
  /** Stops every running bound (the connection is attested or closed). */
  end(): void;
}

/** The 32-byte nonce that an attester in `attesterRole` must bind on this connection. */
export function exporterNonce(socket: TLSSocket, attesterRole: TlsRole): Uint8Array {
  return new Uint8Array(
    socket.exportKeyingMaterial(NONCE_BYTES, EXPORTER_LABEL, Buffer.from(attesterRole, 'ascii')),
  );
}

function refusedByPeer(frame: VerdictFrame): AttestationError {
  const check = frame.check || 'refused';
  const message = `refused by the peer (check ${check}): ${frame.reason || 'no reason given'}`;
  return new AttestationError(check, message, { checks: [{ name: check, ok: false, detail: frame.reason }] });
}

function checkOf(err: unknown): string {
  if (isAttestationError(err)) return err.check;
  if (isConfbootError(err) && err.code === 'deadline-exceeded') return 'timeout';
  return 'internal';
}

/** `p`, or a rejection with the signal's reason as soon as `signal` aborts (`p` runs on). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}

/**
 * Runs the attestation exchange on `socket` (TLS 1.3 established) as `role`, within `budget`.
 * Resolves with the peer's validated attestation (undefined without validators); rejects with an
 * AttestationError (a check failed, here or at the peer) or a ConfbootError (connection lost, issuer
 * failed, a bound of the budget). On failure a deny verdict naming the check has been written; the
 * caller closes the socket.
 */
export function exchangeAttestations(
  socket: TLSSocket,
  role: TlsRole,
  identity: TlsIdentity,
  options: AtlsOptions,
  budget: ExchangeBudget,
): Promise<PeerAttestation | undefined> {
  return new Exchange(socket, role, identity, options, budget).run();
}

/** One run of the exchange protocol; every wait and every piece of scarce work goes through the budget. */
class Exchange {
  private readonly reader: FrameReader;
  private readonly ownNonce: Uint8Array;
  private readonly peerNonce: Uint8Array;
  private readonly timeoutInMs: number;
  /**
   * Every write is tracked: the socket must not reach grpc-js's HTTP/2 session while a write of
   * ours is still in flight (Node aborts on "is_write_in_progress" when the session takes over).
   */
  private readonly inFlight: Promise<void>[] = [];
  private peerRefused = false;
  private issuerError: unknown;

  constructor(
    private readonly socket: TLSSocket,
    private readonly role: TlsRole,
    private readonly identity: TlsIdentity,
    private readonly options: AtlsOptions,
    private readonly budget: ExchangeBudget,
  ) {
    this.reader = new FrameReader(socket, options.maxDocumentBytes ?? DEFAULT_MAX_DOCUMENT_BYTES, (m) =>
      budget.peerClosed(m),
    );
    this.ownNonce = exporterNonce(socket, role);
    this.peerNonce = exporterNonce(socket, role === 'client' ? 'server' : 'client');
    this.timeoutInMs = options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  }

  async run(): Promise<PeerAttestation | undefined> {
    // The client attests right away (its own join; no round trip wasted), and so does a server
    // without an issuer ("none" costs nothing, and tells a joining node at once that a join service
    // answers). A server with an issuer attests only after the peer's ATTESTATION frame has arrived
    // (and, with validators, passed): a peer that has not spoken, or that fails, costs no quote.
    let sent: Promise<void> | undefined;
    let issueFailed: Promise<never> = new Promise<never>(() => {});
    if (this.role === 'client' || this.options.issuer === undefined) {
      sent = this.attest();
      issueFailed = sent.then(() => new Promise<never>(() => {}));
      issueFailed.catch(() => {});
    }
    try {
      const firstRead = this.budget.firstFrame(this.reader);
      firstRead.catch(() => {});
      const first = await Promise.race([firstRead, issueFailed]);
      if (first.type === FRAME_VERDICT) {
        if (first.accepted)
          throw protocolError('frame-format', 'peer sent a verdict before its attestation frame');
        this.peerRefused = true;
        throw refusedByPeer(first);
      }
      // Room for the connection first: one that could not be kept open is not worth verifying.
      await this.budget.holdConnection(this.socket);
      const result = await this.verify(first);
      sent ??= this.attest();
      await sent;
      await this.exchangeVerdicts();
      return result;
    } catch (err) {
      if (!this.peerRefused) {
        // The peer learns the failed check only; the values stay in this side's error (and logs).
        const check = err === this.issuerError ? 'issuer' : checkOf(err);
        this.write(encodeVerdictFrame(false, check, peerRefusalReason(err, check)));
      }
      throw err;
    }
  }

  private write(frame: Buffer): void {
    if (this.socket.destroyed || !this.socket.writable) return;
    this.inFlight.push(new Promise<void>((resolve) => this.socket.write(frame, () => resolve())));
  }

  /** Quotes (within the budget) and writes our ATTESTATION frame. */
  private async attest(): Promise<void> {
    const issuer = this.options.issuer;
    if (issuer === undefined) {
      this.write(encodeAttestationFrame('', new Uint8Array(0)));
      return;
    }
    const signal = this.budget.signal;
    let document: Uint8Array;
    try {
      const issuing = this.budget.issuing(() =>
        issuer.issue(this.identity.spkiHash, this.ownNonce, { signal, timeoutInMs: this.timeoutInMs }),
      );
      // This exchange stops waiting as soon as the connection is abandoned.
      document = await untilAborted(issuing, signal);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      this.issuerError = new ConfbootError(
        isConfbootError(err) ? err.code : 'internal',
        `issuing ${issuer.variant} attestation: ${messageOf(err)}`,
        { cause: err },
      );
      throw this.issuerError;
    }
    this.write(encodeAttestationFrame(issuer.oid, document));
  }

  /**
   * Verifies the peer's frame within the budget (CPU work, taken only now that the frame is here,
   * and given up as soon as the connection is abandoned: a validator waiting on the network, e.g.
   * for a certificate, must not keep working for a peer that has gone).
   */
  private async verify(frame: AttestationFrame): Promise<PeerAttestation | undefined> {
    const validators = this.options.validators ?? [];
    if (validators.length === 0) return undefined;
    const signal = this.budget.signal;
    return this.budget.verifying(async () => {
      try {
        // The validator learns who is calling (e.g. to look up the caller's registered key).
        return await untilAborted(
          verifyPeerAttestation(
            frame,
            this.socket,
            this.peerNonce,
            validators,
            this.options.clock,
            {
              signal,
              timeoutInMs: this.timeoutInMs,
              ...(this.socket.remoteAddress !== undefined ? { peerAddress: this.socket.remoteAddress } : {}),
            },
            this.options.variantOfOid,
          ),
          signal,
        );
      } catch (err) {
        const onRefused = this.options.onEvidenceRefused;
        if (onRefused !== undefined && isAttestationError(err) && validators.some((v) => v.oid === frame.oid))
          onRefused({
            peerAddress: this.socket.remoteAddress,
            oid: frame.oid,
            document: frame.document,
            nonce: this.peerNonce,
            error: err,
          });
        throw err;
      }
    });
  }

  /** Sends our accepting VERDICT and reads the peer's. */
  private async exchangeVerdicts(): Promise<void> {
    this.write(encodeVerdictFrame(true));
    const second = await this.budget.verdict(this.reader);
    if (second.type !== FRAME_VERDICT)
      throw protocolError('frame-format', 'peer sent a second attestation frame instead of its verdict');
    if (!second.accepted) {
      this.peerRefused = true;
      throw refusedByPeer(second);
    }
    await Promise.all(this.inFlight);
  }
}
