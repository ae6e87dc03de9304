/**
 * The operator's Init edge (adapter layer, src/adapters/grpc): `confboot init` calls init.API on
 * the first node over attested TLS, validating the node's attestation with its Validators before
 * a single request byte is sent, and collects the server stream into one outcome.
 */
import { Metadata } from '@grpc/grpc-js';
import { APIClient as InitAPIClient, type InitResponse } from '../../gen/init.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError } from '../../ports/errors.js';
import type { Issuer } from '../../ports/issuer.js';
import type { CallOptions, InitRequest, InitResult } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import { AttestedChannelCredentials } from './atls/credentials.js';
import type { AttestedPeer } from './atls/peer-attestation.js';
import { initEventFromProto, initRequestToProto } from './mapping.js';
import { callError, deadlineFrom, throwIfAborted } from './unary-call.js';

/** Default bound on a whole Init (kubeadm init included). */
export const DEFAULT_INIT_TIMEOUT_MS = 15 * 60_000;
/** Largest amount of log collected from a failed Init; the rest is dropped. */
export const MAX_INIT_LOG_BYTES = 16 * 1024 * 1024;

/** The result of one Init call. `server` is the attested node that answered. */
export type InitOutcome =
  | { kind: 'success'; result: InitResult; logs: Uint8Array; server: AttestedPeer | undefined }
  | { kind: 'failure'; error: string; logs: Uint8Array; server: AttestedPeer | undefined };

/** Options of {@link GrpcInitClient}. */
export interface GrpcInitClientOptions {
  /** Validators for the first node's attestation (at least one). */
  validators: readonly Validator[];
  clock: Clock;
  /** Optional: attest ourselves too (mutual). Upstream's CLI does not. */
  issuer?: Issuer;
  /** Bound on the whole call when CallOptions has none (default 15 min). */
  defaultTimeoutMs?: number;
  /** Bound on TLS handshake + attestation exchange (default 30 s). */
  handshakeTimeoutMs?: number;
}

/** Calls Init on the first node over attested TLS and collects the stream. */
export class GrpcInitClient {
  private readonly options: GrpcInitClientOptions;

  constructor(options: GrpcInitClientOptions) {
    if (options.validators.length === 0) throw new Error('init client: at least one validator is required');
    this.options = options;
  }

  /**
   * Sends `request` to the node at `endpoint` (`host:port`). Resolves with success (kubeconfig,
   * cluster ID) or with the node's failure message and logs; rejects with an AttestationError if the
   * node's attestation fails, or a ConfbootError for transport and status errors.
   */
  async init(endpoint: string, request: InitRequest, options?: CallOptions): Promise<InitOutcome> {
    const operation = `initialising cluster at ${endpoint}`;
    const signal = options?.signal;
    throwIfAborted(signal, operation);
    const credentials = new AttestedChannelCredentials({
      validators: this.options.validators,
      clock: this.options.clock,
      ...(this.options.issuer ? { issuer: this.options.issuer } : {}),
      ...(this.options.handshakeTimeoutMs !== undefined
        ? { handshakeTimeoutMs: this.options.handshakeTimeoutMs }
        : {}),
    });
    const client = new InitAPIClient(endpoint, credentials, { 'grpc.use_local_subchannel_pool': 1 });
    try {
      return await new Promise<InitOutcome>((resolve, reject) => {
        const stream = client.init(initRequestToProto(request), new Metadata(), {
          deadline: deadlineFrom(options, this.options.defaultTimeoutMs ?? DEFAULT_INIT_TIMEOUT_MS),
        });
        const onAbort = () => stream.cancel();
        signal?.addEventListener('abort', onAbort, { once: true });
        let success: InitResult | undefined;
        let failure: string | undefined;
        const logs: Uint8Array[] = [];
        let logBytes = 0;
        const outcome = (): InitOutcome | undefined => {
          const joined = new Uint8Array(Buffer.concat(logs));
          if (success)
            return { kind: 'success', result: success, logs: joined, server: credentials.attestedPeer() };
          if (failure !== undefined)
            return { kind: 'failure', error: failure, logs: joined, server: credentials.attestedPeer() };
          return undefined;
        };
        stream.on('data', (msg: InitResponse) => {
          const event = initEventFromProto(msg);
          if (event?.kind === 'success') success = event.result;
          else if (event?.kind === 'failure') failure = event.error;
          else if (event?.kind === 'log' && logBytes < MAX_INIT_LOG_BYTES) {
            const chunk = event.chunk.subarray(0, MAX_INIT_LOG_BYTES - logBytes);
            logs.push(chunk);
            logBytes += chunk.length;
          }
        });
        stream.on('error', (err) => {
          signal?.removeEventListener('abort', onAbort);
          // Upstream ends a failed Init with an error status after the failure message and logs.
          const done = failure !== undefined ? outcome() : undefined;
          if (done) resolve(done);
          else reject(callError(err, operation, credentials, signal));
        });
        stream.on('end', () => {
          signal?.removeEventListener('abort', onAbort);
          const done = outcome();
          if (done) resolve(done);
          else reject(new ConfbootError('internal', `${operation}: stream ended without success or failure`));
        });
      });
    } finally {
      client.close();
    }
  }
}
