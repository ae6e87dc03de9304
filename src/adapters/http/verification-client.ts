/**
 * The verifier's side of the verification service (node:http, plain HTTP): asks the node at
 * `host:port` for a document bound to a nonce (`GET /?nonce=<base64url>`) and returns the document
 * with the address the answer came from (the connection's remote address: what an attestation-key
 * registry is keyed by). Bounded: one deadline over connect and answer, and an answer of at most
 * `maxAnswerBytes`. Never goes through a proxy.
 */
import { request } from 'node:http';
import { ConfbootError, isConfbootError, messageOf } from '../../ports/errors.js';
import { canonicalIp, joinHostPort, splitHostPort } from '../../ports/peer-address.js';
import type { CallOptions } from '../../ports/types.js';
import type { AttestationFetcher, FetchedAttestation } from '../../ports/verification.js';

/** Default bound on one fetch, connect to last byte, in ms. */
export const DEFAULT_FETCH_TIMEOUT_MS = 30_000;
/** Default largest answer accepted, in bytes. */
export const DEFAULT_MAX_ANSWER_BYTES = 4 << 20;

/** Reason of an answer that is not the verification service's JSON (the node is refused). */
export const BAD_ANSWER = 'bad-answer';

/** Options of {@link HttpAttestationFetcher}. */
export interface HttpAttestationFetcherOptions {
  /** Largest answer accepted (default {@link DEFAULT_MAX_ANSWER_BYTES}). */
  maxAnswerBytes?: number;
}

/** The error for an HTTP status the service answered with. */
function statusError(status: number, body: string, at: string): ConfbootError {
  let reason = body.trim().slice(0, 200);
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    if (typeof parsed.error === 'string') reason = parsed.error.slice(0, 200);
  } catch {}
  const message = `the verification service at ${at} answered HTTP ${status}${reason ? ` (${reason})` : ''}`;
  if (status === 429) return new ConfbootError('resource-exhausted', message);
  if (status === 400 || status === 413) return new ConfbootError('invalid-argument', message);
  if (status >= 500) return new ConfbootError('unavailable', message);
  return new ConfbootError('invalid-argument', message, { reason: BAD_ANSWER });
}

/** The document of a 200 answer. */
function documentOf(body: string, at: string): Uint8Array {
  let data: unknown;
  try {
    data = (JSON.parse(body) as { data?: unknown }).data;
  } catch (err) {
    throw new ConfbootError('invalid-argument', `the answer from ${at} is not JSON: ${messageOf(err)}`, {
      reason: BAD_ANSWER,
    });
  }
  if (typeof data !== 'string' || data === '' || !/^[A-Za-z0-9+/]*={0,2}$/.test(data))
    throw new ConfbootError('invalid-argument', `the answer from ${at} holds no base64 "data"`, {
      reason: BAD_ANSWER,
    });
  return new Uint8Array(Buffer.from(data, 'base64'));
}

/** {@link AttestationFetcher} over HTTP. */
export class HttpAttestationFetcher implements AttestationFetcher {
  readonly #maxAnswer: number;

  constructor(options: HttpAttestationFetcherOptions = {}) {
    this.#maxAnswer = options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES;
  }

  /** `endpoint` is `HOST:PORT` (IPv6 in brackets). */
  fetch(endpoint: string, nonce: Uint8Array, options: CallOptions = {}): Promise<FetchedAttestation> {
    const target = splitHostPort(endpoint);
    if (target === undefined)
      return Promise.reject(new ConfbootError('invalid-argument', `endpoint ${endpoint} is not HOST:PORT`));
    const at = joinHostPort(target.host, target.port);
    const timeoutMs = options.timeoutInMs ?? DEFAULT_FETCH_TIMEOUT_MS;
    const deadline = AbortSignal.timeout(timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
    const path = `/?nonce=${Buffer.from(nonce).toString('base64url')}`;
    return new Promise<FetchedAttestation>((resolve, reject) => {
      const fail = (err: unknown) => {
        if (isConfbootError(err)) reject(err);
        else if (deadline.aborted)
          reject(new ConfbootError('deadline-exceeded', `no answer from ${at} within ${timeoutMs} ms`));
        else reject(new ConfbootError('unavailable', `asking ${at}: ${messageOf(err)}`, { cause: err }));
      };
      const req = request(
        { host: target.host, port: target.port, path, method: 'GET', agent: false, signal },
        (res) => {
          const remote = res.socket.remoteAddress ?? target.host;
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > this.#maxAnswer) {
              res.destroy(
                new ConfbootError(
                  'invalid-argument',
                  `the answer from ${at} exceeds ${this.#maxAnswer} bytes`,
                  {
                    reason: BAD_ANSWER,
                  },
                ),
              );
              return;
            }
            chunks.push(c);
          });
          res.on('error', fail);
          res.on('end', () => {
            const body = Buffer.concat(chunks).toString('utf8');
            try {
              if (res.statusCode !== 200) throw statusError(res.statusCode ?? 0, body, at);
              resolve({ document: documentOf(body, at), peerAddress: canonicalIp(remote) ?? remote });
            } catch (err) {
              fail(err);
            }
          });
        },
      );
      req.on('error', fail);
      req.end();
    });
  }
}
