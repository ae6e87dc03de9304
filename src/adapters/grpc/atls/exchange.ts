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
import type { AttestationCheck, CallOptions, MeasurementMismatch } from '../../../ports/types.js';
import type { Validator } from '../../../ports/validator.js';
import { type Variant, variantFromOid } from '../../../ports/variant.js';
import { type AtlsDeadlines, type PhaseTimer, resolveDeadlines, type Slots } from './admission.js';
import { checkPeerCertificate, type TlsIdentity } from './certificate.js';
import {
  type AttestationFrame,
  DEFAULT_MAX_DOCUMENT_BYTES,
  EXPORTER_LABEL,
  encodeAttestationFrame,
  encodeVerdictFrame,
  FRAME_ATTESTATION,
  FRAME_VERDICT,
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
   * Deadlines of the phases that wait for the peer (defaults DEFAULT_ATLS_DEADLINES, admission.ts).
   * Both ends bound the TLS handshake; the server also bounds the peer's ATTESTATION frame (with a
   * bytes-per-second floor) and its VERDICT. `handshakeTimeoutMs` stays the bound on the whole.
   */
  deadlines?: Partial<AtlsDeadlines>;
  /** Server side: the peer's attestation is verified under one of these slots (CPU work). */
  verificationSlots?: Slots;
  /**
   * Server side: our own attestation (a TPM quote) for an inbound peer is issued under one of these
   * slots, taken after the peer's ATTESTATION frame has arrived. A {@link Slots} with a waiting cap
   * refuses beyond it (deny verdict, check `issuer`, recoverable), so inbound peers can keep only a
   * few quotes running or queued and the node's own outbound quotes are never stuck behind them.
   */
  issuanceSlots?: Slots;
  /**
   * Server side: capacity for attested connections. A slot is taken after the peer's ATTESTATION
   * frame has arrived and before it is verified, and is held until the TLS socket closes, so a
   * connection that could not be kept open is never verified (a burst waits here, in FIFO order,
   * instead of being verified and then closed). Waiting holds no verification slot; the whole
   * exchange stays under `handshakeTimeoutMs`.
   */
  connectionSlots?: Slots;
  /**
   * Called once per connection when the peer's first frame (its ATTESTATION frame, or a refusal)
   * has arrived: the peer speaks attested TLS and answers. The join client uses it to tell a
   * stalled endpoint from a busy service that is still verifying it.
   */
  onPeerAnswered?: () => void;
  /**
   * Called with the evidence of every attestation frame this end's validators refused (the join
   * service keeps it for dry runs of new policies). Not called for frames refused before a
   * validator ran on them, such as an unknown variant OID.
   */
  onEvidenceRefused?: (evidence: RefusedEvidence) => void;
}

/** An attestation document a validator refused, with what it was checked against. */
export interface RefusedEvidence {
  /** The peer's address (`ip`), when known. */
  peerAddress: string | undefined;
  oid: string;
  document: Uint8Array;
  /** The TLS-exporter nonce the document had to bind. */
  nonce: Uint8Array;
  error: Error;
}

/** The peer's validated attestation. */
export interface PeerAttestation {
  variant: Variant;
  oid: string;
  /** SHA-256 of the peer's TLS SPKI, as attested. */
  userData: Uint8Array;
  /** Every check performed, in order (aTLS checks and the validator's). */
  checks: AttestationCheck[];
  /** warnOnly measurement mismatches reported by the validator. */
  warnings: MeasurementMismatch[];
  /** The attestation document as received (the evidence the verdict was made on). */
  document: Uint8Array;
  /** The 32-byte TLS-exporter nonce the document had to bind on this connection. */
  nonce: Uint8Array;
  /** The measurement set the document matched (see ValidationResult.measurementSet). */
  measurementSet?: string;
}

/** A connection that passed attested TLS. */
export interface AttestedPeer {
  /** Peer address as grpc-js reports it (`ip:port`). */
  address: string;
  /** The peer's validated attestation; undefined when this end has no validators. */
  attestation: PeerAttestation | undefined;
}

/** The 32-byte nonce that an attester in `attesterRole` must bind on this connection. */
export function exporterNonce(socket: TLSSocket, attesterRole: TlsRole): Uint8Array {
  return new Uint8Array(
    socket.exportKeyingMaterial(NONCE_BYTES, EXPORTER_LABEL, Buffer.from(attesterRole, 'ascii')),
  );
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a).equals(Buffer.from(b));
}

/**
 * Verifies the peer's attestation frame: certificate, OID, validator, user-data binding.
 * Rejects with an AttestationError naming the failed check and listing the checks performed.
 */
export async function verifyPeerAttestation(
  frame: AttestationFrame,
  socket: TLSSocket,
  nonce: Uint8Array,
  validators: readonly Validator[],
  clock: Clock,
  callOptions: CallOptions,
): Promise<PeerAttestation> {
  const checks: AttestationCheck[] = [];
  const fail = (
    check: string,
    message: string,
    extra?: { mismatches?: MeasurementMismatch[]; cause?: unknown },
  ) =>
    new AttestationError(check, message, {
      checks: [...checks, { name: check, ok: false, detail: message }],
      ...extra,
    });
  let spkiHash: Uint8Array;
  try {
    spkiHash = checkPeerCertificate(socket.getPeerX509Certificate(), clock);
  } catch (err) {
    throw isAttestationError(err) ? fail(err.check, err.message) : err;
  }
  checks.push({ name: 'peer-certificate', ok: true, detail: 'self-signed and within its validity' });
  if (frame.oid === '')
    throw fail('attestation-missing', 'peer sent no attestation, but this end requires one');
  const validator = validators.find((v) => v.oid === frame.oid);
  if (validator === undefined) {
    const name = variantFromOid(frame.oid);
    const accepted = validators.map((v) => `${v.variant} (${v.oid})`).join(', ');
    throw fail(
      'unknown-oid',
      `attestation variant OID ${frame.oid}${name ? ` (${name})` : ''} is not accepted; accepted: ${accepted}`,
    );
  }
  checks.push({ name: 'variant-oid', ok: true, detail: `${validator.variant} (${validator.oid})` });
  let result: Awaited<ReturnType<Validator['validate']>>;
  try {
    result = await validator.validate(frame.document, nonce, callOptions);
  } catch (err) {
    if (isAttestationError(err))
      throw new AttestationError(err.check, `${validator.variant} attestation: ${err.message}`, {
        checks: [
          ...checks,
          ...err.checks,
          ...(err.checks.some((c) => !c.ok) ? [] : [{ name: err.check, ok: false }]),
        ],
        mismatches: err.mismatches,
        cause: err,
      });
    const message = messageOf(err);
    throw fail('validator', `validating ${validator.variant} attestation: ${message}`, { cause: err });
  }
  checks.push(...result.checks);
  if (!bytesEqual(result.userData, spkiHash))
    throw fail('user-data', "attested user data does not match the SHA-256 of the peer's TLS public key");
  checks.push({ name: 'user-data', ok: true, detail: 'binds the peer TLS public key' });
  return {
    variant: validator.variant,
    oid: validator.oid,
    userData: result.userData,
    checks,
    warnings: result.warnings,
    document: frame.document,
    nonce,
    ...(result.measurementSet === undefined ? {} : { measurementSet: result.measurementSet }),
  };
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
 * Runs the attestation exchange on `socket` (TLS 1.3 established) as `role`. Resolves with the
 * peer's validated attestation (undefined without validators); rejects with an AttestationError
 * (a check failed, here or at the peer) or a ConfbootError (connection lost, issuer failed). On
 * failure a deny verdict naming the check has been written; the caller closes the socket.
 */
export async function exchangeAttestations(
  socket: TLSSocket,
  role: TlsRole,
  identity: TlsIdentity,
  options: AtlsOptions,
  signal: AbortSignal,
  phase?: PhaseTimer,
): Promise<PeerAttestation | undefined> {
  // The server bounds each wait for the client; the client waits for the server's verification.
  const deadlines =
    role === 'server' && phase !== undefined ? resolveDeadlines(options.deadlines) : undefined;
  const peerRole: TlsRole = role === 'client' ? 'server' : 'client';
  const ownNonce = exporterNonce(socket, role);
  const peerNonce = exporterNonce(socket, peerRole);
  const validators = options.validators ?? [];
  const timeoutInMs = options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
  const reader = new FrameReader(socket, options.maxDocumentBytes ?? DEFAULT_MAX_DOCUMENT_BYTES);
  // Every write is tracked: the socket must not reach grpc-js's HTTP/2 session while a write of
  // ours is still in flight (Node aborts on "is_write_in_progress" when the session takes over).
  const inFlight: Promise<void>[] = [];
  const write = (frame: Buffer) => {
    if (socket.destroyed || !socket.writable) return;
    inFlight.push(new Promise<void>((resolve) => socket.write(frame, () => resolve())));
  };
  let peerRefused = false;
  let issuerError: unknown;

  /** Quotes (under an issuance slot on the server) and writes our ATTESTATION frame. */
  const attest = async (): Promise<void> => {
    const issuer = options.issuer;
    if (issuer === undefined) {
      write(encodeAttestationFrame('', new Uint8Array(0)));
      return;
    }
    let document: Uint8Array;
    try {
      const release = role === 'server' ? await options.issuanceSlots?.acquire(signal) : undefined;
      const issuing = issuer.issue(identity.spkiHash, ownNonce, { signal, timeoutInMs });
      // The slot covers the issuer's work itself: it is given back when the issuer settles (an
      // aborted quote still queued on the TPM is dropped there at once), while this exchange
      // stops waiting as soon as the connection is abandoned.
      void issuing.then(
        () => release?.(),
        () => release?.(),
      );
      document = await untilAborted(issuing, signal);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      const message = messageOf(err);
      issuerError = new ConfbootError(
        isConfbootError(err) ? err.code : 'internal',
        `issuing ${issuer.variant} attestation: ${message}`,
        {
          cause: err,
        },
      );
      throw issuerError;
    }
    write(encodeAttestationFrame(issuer.oid, document));
  };
  // The client attests right away (its own join; no round trip wasted), and so does a server
  // without an issuer ("none" costs nothing, and tells a joining node at once that a join service
  // answers). A server with an issuer attests only after the peer's ATTESTATION frame has arrived
  // (and, with validators, passed): a peer that has not spoken, or that fails, costs no quote.
  let sent: Promise<void> | undefined;
  let issueFailed: Promise<never> = new Promise<never>(() => {});
  if (role === 'client' || options.issuer === undefined) {
    sent = attest();
    issueFailed = sent.then(() => new Promise<never>(() => {}));
    issueFailed.catch(() => {});
  }

  try {
    let firstRead: ReturnType<FrameReader['next']>;
    if (deadlines !== undefined && phase !== undefined) {
      const started = Date.now();
      phase.arm('attestation-timeout', deadlines.attestationMs, 'complete ATTESTATION frame from the peer');
      firstRead = reader.next((type, length) => {
        if (type !== FRAME_ATTESTATION) return;
        const ms =
          deadlines.attestationMs +
          (length * 1000) / deadlines.attestationMinBytesPerSecond -
          (Date.now() - started);
        phase.arm(
          'attestation-timeout',
          Math.max(1, ms),
          `complete ATTESTATION frame of ${length} bytes from the peer`,
        );
      });
    } else firstRead = reader.next();
    firstRead.catch(() => {});
    const first = await Promise.race([firstRead, issueFailed]);
    phase?.clear();
    options.onPeerAnswered?.();
    if (first.type === FRAME_VERDICT) {
      if (first.accepted)
        throw protocolError('frame-format', 'peer sent a verdict before its attestation frame');
      peerRefused = true;
      throw refusedByPeer(first);
    }
    let result: PeerAttestation | undefined;
    if (options.connectionSlots !== undefined) {
      // Room for the connection first: one that could not be kept open is not worth verifying.
      const releaseConnection = await options.connectionSlots.acquire(signal);
      if (socket.destroyed) releaseConnection();
      else socket.once('close', releaseConnection);
    }
    if (validators.length > 0) {
      // Verification is CPU work: it runs under a slot, taken only now that the frame is here, and
      // given back as soon as the connection is abandoned (a validator waiting on the network, e.g.
      // for a certificate, must not keep the slot for a peer that has gone).
      const release = await options.verificationSlots?.acquire(signal);
      try {
        // The validator learns who is calling (e.g. to look up the caller's registered key).
        result = await untilAborted(
          verifyPeerAttestation(first, socket, peerNonce, validators, options.clock, {
            signal,
            timeoutInMs,
            ...(socket.remoteAddress !== undefined ? { peerAddress: socket.remoteAddress } : {}),
          }),
          signal,
        );
      } catch (err) {
        if (
          options.onEvidenceRefused !== undefined &&
          isAttestationError(err) &&
          validators.some((v) => v.oid === first.oid)
        )
          options.onEvidenceRefused({
            peerAddress: socket.remoteAddress,
            oid: first.oid,
            document: first.document,
            nonce: peerNonce,
            error: err,
          });
        throw err;
      } finally {
        release?.();
      }
    }
    sent ??= attest();
    await sent;
    write(encodeVerdictFrame(true));
    if (deadlines !== undefined) phase?.arm('verdict-timeout', deadlines.verdictMs, 'VERDICT from the peer');
    const second = await reader.next();
    phase?.clear();
    if (second.type !== FRAME_VERDICT)
      throw protocolError('frame-format', 'peer sent a second attestation frame instead of its verdict');
    if (!second.accepted) {
      peerRefused = true;
      throw refusedByPeer(second);
    }
    await Promise.all(inFlight);
    return result;
  } catch (err) {
    phase?.clear();
    if (!peerRefused) {
      // The peer learns the failed check only; the values stay in this side's error (and logs).
      const check = err === issuerError ? 'issuer' : checkOf(err);
      write(encodeVerdictFrame(false, check, peerRefusalReason(err, check)));
    }
    throw err;
  }
}
