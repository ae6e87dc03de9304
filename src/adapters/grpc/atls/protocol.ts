/**
 * Attested TLS wire protocol (adapter layer, src/adapters/grpc/atls): the frames both ends exchange
 * inside a fresh TLS 1.3 session, after the handshake and before the socket is handed to grpc-js.
 * This module only encodes, decodes and reads frames; docs/atls.md is the specification.
 *
 * Frame = header (10 bytes) + body:
 *   magic "CBAT" (4) | version 0x01 (1) | type (1) | body length, big-endian uint32 (4)
 * ATTESTATION body: oid length u8 | oid (ASCII dotted) | document (rest); oid length 0 = "none"
 * VERDICT body:     status u8 (0 accept, 1 deny) | check length u8 | check (ASCII) | reason (UTF-8, rest)
 */
import type { Readable } from 'node:stream';
import { AttestationError, ConfbootError } from '../../../ports/errors.js';

/** First four bytes of every frame: ASCII "CBAT" (ConfBoot ATtested). */
export const FRAME_MAGIC = Buffer.from('CBAT', 'ascii');
/** Protocol version carried in every frame. */
export const PROTOCOL_VERSION = 1;
/** Header length in bytes: magic (4) + version (1) + type (1) + body length (4). */
export const FRAME_HEADER_BYTES = 10;
/** Frame type: the sender's attestation (or an explicit "none"). */
export const FRAME_ATTESTATION = 0x01;
/** Frame type: the receiver's accept/deny answer, also used to abort with a reason. */
export const FRAME_VERDICT = 0x02;
/** Default and hard upper bound of an attestation document: 1 MiB. */
export const DEFAULT_MAX_DOCUMENT_BYTES = 1024 * 1024;
/** Longest accepted OID string (upstream's are ≤ 13 characters). */
export const MAX_OID_BYTES = 64;
/** Longest verdict reason; longer reasons are truncated by the sender. */
export const MAX_REASON_BYTES = 1024;
/** Largest accepted verdict body: status + check + reason. */
export const MAX_VERDICT_BODY_BYTES = 2 + 255 + MAX_REASON_BYTES;
/** TLS exporter label; the context is the attester's TLS role (`client` or `server`). */
export const EXPORTER_LABEL = 'EXPORTER-confboot-atls-v1';
/** Nonce length taken from the exporter. */
export const NONCE_BYTES = 32;

/** An attestation frame: `oid` is empty when the sender does not attest. */
export interface AttestationFrame {
  type: typeof FRAME_ATTESTATION;
  oid: string;
  document: Uint8Array;
}

/** A verdict frame. `check` names the failed check on deny (empty on accept). */
export interface VerdictFrame {
  type: typeof FRAME_VERDICT;
  accepted: boolean;
  check: string;
  reason: string;
}

/** Any frame of the protocol. */
export type Frame = AttestationFrame | VerdictFrame;

const OID_PATTERN = /^[0-2](\.(0|[1-9][0-9]*))+$/;

function header(type: number, bodyLength: number): Buffer {
  const h = Buffer.alloc(FRAME_HEADER_BYTES);
  FRAME_MAGIC.copy(h, 0);
  h.writeUInt8(PROTOCOL_VERSION, 4);
  h.writeUInt8(type, 5);
  h.writeUInt32BE(bodyLength, 6);
  return h;
}

/** Encodes an attestation frame; `oid` empty and `document` empty mean "no attestation". */
export function encodeAttestationFrame(oid: string, document: Uint8Array): Buffer {
  const oidBytes = Buffer.from(oid, 'ascii');
  if (oidBytes.length > MAX_OID_BYTES) throw new Error(`attestation OID longer than ${MAX_OID_BYTES} bytes`);
  if (oidBytes.length === 0 && document.length > 0) throw new Error('attestation document without an OID');
  const body = Buffer.concat([Buffer.of(oidBytes.length), oidBytes, document]);
  return Buffer.concat([header(FRAME_ATTESTATION, body.length), body]);
}

/** Encodes a verdict frame; the reason is truncated to {@link MAX_REASON_BYTES} bytes. */
export function encodeVerdictFrame(accepted: boolean, check = '', reason = ''): Buffer {
  const checkBytes = Buffer.from(check.replace(/[^\x20-\x7e]/g, '?').slice(0, 255), 'ascii');
  let reasonBytes = Buffer.from(reason, 'utf8');
  if (reasonBytes.length > MAX_REASON_BYTES) reasonBytes = reasonBytes.subarray(0, MAX_REASON_BYTES);
  const body = Buffer.concat([Buffer.of(accepted ? 0 : 1, checkBytes.length), checkBytes, reasonBytes]);
  return Buffer.concat([header(FRAME_VERDICT, body.length), body]);
}

/** A protocol violation by the peer: garbage, truncation, an oversized or unexpected frame. */
export function protocolError(check: 'frame-format' | 'frame-size', message: string): AttestationError {
  return new AttestationError(check, message, { checks: [{ name: check, ok: false, detail: message }] });
}

/** Decodes a frame body whose header said `type`. */
export function decodeBody(type: number, body: Buffer): Frame {
  if (type === FRAME_ATTESTATION) {
    if (body.length < 1) throw protocolError('frame-format', 'attestation frame has an empty body');
    const oidLength = body.readUInt8(0);
    if (oidLength > MAX_OID_BYTES)
      throw protocolError('frame-format', `attestation OID length ${oidLength} too long`);
    if (body.length < 1 + oidLength)
      throw protocolError('frame-format', 'attestation frame truncated inside the OID');
    const oid = body.subarray(1, 1 + oidLength).toString('latin1');
    if (oidLength > 0 && !OID_PATTERN.test(oid))
      throw protocolError('frame-format', `attestation OID ${JSON.stringify(oid)} is not a dotted OID`);
    const document = new Uint8Array(body.subarray(1 + oidLength));
    if (oidLength === 0 && document.length > 0)
      throw protocolError('frame-format', 'attestation document sent without an OID');
    return { type: FRAME_ATTESTATION, oid, document };
  }
  if (type === FRAME_VERDICT) {
    if (body.length < 2) throw protocolError('frame-format', 'verdict frame shorter than 2 bytes');
    const status = body.readUInt8(0);
    if (status > 1)
      throw protocolError('frame-format', `verdict status ${status} is neither accept nor deny`);
    const checkLength = body.readUInt8(1);
    if (body.length < 2 + checkLength)
      throw protocolError('frame-format', 'verdict frame truncated inside the check');
    const check = body.subarray(2, 2 + checkLength).toString('latin1');
    const reason = body.subarray(2 + checkLength).toString('utf8');
    return { type: FRAME_VERDICT, accepted: status === 0, check, reason };
  }
  throw protocolError('frame-format', `unknown frame type 0x${type.toString(16).padStart(2, '0')}`);
}

/**
 * Reads frames from a socket without consuming a byte beyond the last frame, so the bytes that
 * follow (HTTP/2) stay buffered for grpc-js. Refuses an oversized frame from its header alone,
 * without buffering its body.
 */
export class FrameReader {
  private readonly socket: Readable;
  private readonly maxDocumentBytes: number;
  private readonly closed: (message: string) => Error;

  /**
   * `closed` makes the error for a connection that closed or failed between frames (default
   * `unavailable`); an end of the connection inside a frame is always a truncated frame.
   */
  constructor(
    socket: Readable,
    maxDocumentBytes = DEFAULT_MAX_DOCUMENT_BYTES,
    closed: (message: string) => Error = (message) => new ConfbootError('unavailable', message),
  ) {
    this.socket = socket;
    this.maxDocumentBytes = Math.min(maxDocumentBytes, DEFAULT_MAX_DOCUMENT_BYTES * 64);
    this.closed = closed;
  }

  /**
   * Reads the next whole frame. Rejects with an AttestationError (`frame-format`, `frame-size`) or
   * a closed-connection error. `onHeader` sees a valid header's type and body length before the
   * body is read (the listener sizes the frame's deadline from it).
   */
  async next(onHeader?: (type: number, bodyLength: number) => void): Promise<Frame> {
    const h = await this.readExactly(FRAME_HEADER_BYTES, 'frame header');
    if (!h.subarray(0, 4).equals(FRAME_MAGIC))
      throw protocolError(
        'frame-format',
        `bad frame magic 0x${h.subarray(0, 4).toString('hex')} (peer does not speak confboot attested TLS)`,
      );
    const version = h.readUInt8(4);
    if (version !== PROTOCOL_VERSION)
      throw protocolError(
        'frame-format',
        `unsupported protocol version ${version} (want ${PROTOCOL_VERSION})`,
      );
    const type = h.readUInt8(5);
    const length = h.readUInt32BE(6);
    const limit =
      type === FRAME_ATTESTATION
        ? 1 + MAX_OID_BYTES + this.maxDocumentBytes
        : type === FRAME_VERDICT
          ? MAX_VERDICT_BODY_BYTES
          : -1;
    if (limit < 0)
      throw protocolError('frame-format', `unknown frame type 0x${type.toString(16).padStart(2, '0')}`);
    if (length > limit)
      throw protocolError('frame-size', `frame of ${length} bytes exceeds the limit of ${limit} bytes`);
    onHeader?.(type, length);
    const body = length === 0 ? Buffer.alloc(0) : await this.readExactly(length, 'frame body');
    return decodeBody(type, body);
  }

  private readExactly(n: number, what: string): Promise<Buffer> {
    const socket = this.socket;
    return new Promise<Buffer>((resolve, reject) => {
      const cleanup = () => {
        socket.off('readable', attempt);
        socket.off('end', onEnd);
        socket.off('close', onEnd);
        socket.off('error', onError);
      };
      const onEnd = () => {
        cleanup();
        const rest = socket.readableLength > 0 ? (socket.read() as Buffer | null) : null;
        if (rest && rest.length > 0)
          reject(
            protocolError(
              'frame-format',
              `connection closed inside the ${what} (${rest.length} of ${n} bytes)`,
            ),
          );
        else reject(this.closed(`connection closed by the peer while waiting for the ${what}`));
      };
      const onError = (err: Error) => {
        cleanup();
        reject(this.closed(`connection failed while reading the ${what}: ${err.message}`));
      };
      const attempt = () => {
        const chunk = socket.read(n) as Buffer | null;
        if (chunk === null) {
          if (socket.readableEnded || socket.destroyed) onEnd();
          return;
        }
        if (chunk.length < n) {
          cleanup();
          reject(
            protocolError(
              'frame-format',
              `connection closed inside the ${what} (${chunk.length} of ${n} bytes)`,
            ),
          );
          return;
        }
        cleanup();
        resolve(chunk);
      };
      socket.on('readable', attempt);
      socket.once('end', onEnd);
      socket.once('close', onEnd);
      socket.once('error', onError);
      attempt();
    });
  }
}
