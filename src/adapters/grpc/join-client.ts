/**
 * The joining node's gRPC edge (adapter layer, src/adapters/grpc): implements the JoinTicketClient
 * port over attested TLS. The node attests with its Issuer; like upstream it does not verify the
 * join service unless validators are given (mutual). One call is one channel and at most one
 * connection (one TPM quote): the channel's credentials stop reconnecting as soon as the call has
 * finished, and the channel is always closed. With `localAddress` the connection leaves from that
 * address (a loopback node's own 127.0.0.x), so the join service sees who is calling.
 */
import { isIP } from 'node:net';
import {
  type ClientUnaryCall,
  type CallOptions as GrpcCallOptions,
  Metadata,
  type ServiceError,
} from '@grpc/grpc-js';
import { APIClient as JoinAPIClient } from '../../gen/join.js';
import type { Clock } from '../../ports/clock.js';
import { CONNECTION_REFUSED, ConfbootError, messageOf, reasonOf } from '../../ports/errors.js';
import type { Issuer } from '../../ports/issuer.js';
import type { JoinTicketClient } from '../../ports/join-ticket-client.js';
import type { Logger } from '../../ports/logger.js';
import type {
  CallOptions,
  JoinTicket,
  JoinTicketRequest,
  RejoinTicket,
  RejoinTicketRequest,
} from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import {
  DEFAULT_CLIENT_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_CLIENT_TLS_HANDSHAKE_MS,
} from './atls/client-deadline.js';
import { AttestedChannelCredentials } from './atls/credentials.js';
import { processTlsIdentity } from './atls/identity-pool.js';
import {
  joinRequestToProto,
  joinTicketFromProto,
  rejoinRequestToProto,
  rejoinTicketFromProto,
} from './mapping.js';
import { callError, deadlineFrom, throwIfAborted } from './unary-call.js';

/**
 * Default deadline for reaching a join service that answers at one endpoint (see connectTimeoutMs):
 * a busy join service queues a burst's handshakes for up to 40 s before starting them, so the
 * client waits that long plus one handshake (the client's TLS handshake deadline, 45 s).
 */
export const DEFAULT_JOIN_CONNECT_TIMEOUT_MS = DEFAULT_CLIENT_TLS_HANDSHAKE_MS;

/**
 * Default deadline of one join or rejoin call, connection included: the whole attested handshake
 * (55 s, which covers the service's handshake queue) plus 5 s for the ticket, 60 s. Upstream's join
 * client uses 30 s, without a handshake queue in front of the service.
 */
export const DEFAULT_JOIN_CALL_TIMEOUT_MS = DEFAULT_CLIENT_HANDSHAKE_TIMEOUT_MS + 5_000;

/** Options of {@link GrpcJoinTicketClient}. */
export interface GrpcJoinTicketClientOptions {
  /** This node's attestation issuer. */
  issuer: Issuer;
  clock: Clock;
  /** Optional: also verify the join service (mutual attestation). */
  validators?: readonly Validator[];
  /** Per-call timeout when CallOptions has none (default {@link DEFAULT_JOIN_CALL_TIMEOUT_MS}). */
  defaultTimeoutMs?: number;
  /** Bound on TLS handshake + attestation exchange (default {@link DEFAULT_CLIENT_HANDSHAKE_TIMEOUT_MS}). */
  handshakeTimeoutMs?: number;
  /**
   * Deadline for reaching a join service that answers at one endpoint: TCP connect, TLS handshake
   * and the service's first attested TLS frame (default {@link DEFAULT_JOIN_CONNECT_TIMEOUT_MS}).
   * Past it the call fails `unavailable` at once, so the caller moves on to its next endpoint
   * instead of waiting out the call deadline. A service that has answered may take until
   * `handshakeTimeoutMs` and the call deadline to verify this node and issue its ticket (a busy
   * service queues verifications, and giving up there would only repeat the work).
   */
  connectTimeoutMs?: number;
  /** Deadline of the TLS handshake alone, from TCP connect (default {@link DEFAULT_CLIENT_TLS_HANDSHAKE_MS}). */
  tlsHandshakeTimeoutMs?: number;
  logger?: Logger;
  /** Local address outgoing connections leave from (IP literal); default: the system's choice. */
  localAddress?: string;
}

/** JoinTicketClient over grpc-js and attested TLS. */
export class GrpcJoinTicketClient implements JoinTicketClient {
  private readonly options: GrpcJoinTicketClientOptions;

  /**
   * Throws `invalid-argument` when `localAddress` is not an IP literal. Starts making the process's
   * TLS identity (atls/identity-pool.ts) if it does not exist yet.
   */
  constructor(options: GrpcJoinTicketClientOptions) {
    if (options.localAddress !== undefined && isIP(options.localAddress) === 0)
      throw new ConfbootError(
        'invalid-argument',
        `join client: local address ${JSON.stringify(options.localAddress)} is not an IP address`,
      );
    const connectMs = options.connectTimeoutMs ?? DEFAULT_JOIN_CONNECT_TIMEOUT_MS;
    if (!Number.isFinite(connectMs) || connectMs <= 0)
      throw new ConfbootError(
        'invalid-argument',
        `join client: connectTimeoutMs must be > 0, got ${connectMs}`,
      );
    this.options = options;
    processTlsIdentity(options.clock, 'client', options.logger ? { logger: options.logger } : {}).warm();
  }

  /** Asks the join service at `endpoint` (`host:port`) for a join ticket. */
  issueJoinTicket(endpoint: string, request: JoinTicketRequest, options?: CallOptions): Promise<JoinTicket> {
    return this.call(
      endpoint,
      `issuing join ticket from ${endpoint}`,
      options,
      (client, meta, opts, cb) => client.issueJoinTicket(joinRequestToProto(request), meta, opts, cb),
      joinTicketFromProto,
    );
  }

  /** Asks the join service at `endpoint` for a rejoin ticket. */
  issueRejoinTicket(
    endpoint: string,
    request: RejoinTicketRequest,
    options?: CallOptions,
  ): Promise<RejoinTicket> {
    return this.call(
      endpoint,
      `issuing rejoin ticket from ${endpoint}`,
      options,
      (client, meta, opts, cb) => client.issueRejoinTicket(rejoinRequestToProto(request), meta, opts, cb),
      rejoinTicketFromProto,
    );
  }

  private async call<Res, Out>(
    endpoint: string,
    operation: string,
    options: CallOptions | undefined,
    invoke: (
      client: JoinAPIClient,
      meta: Metadata,
      opts: Partial<GrpcCallOptions>,
      cb: (err: ServiceError | null, res: Res) => void,
    ) => ClientUnaryCall,
    fromProto: (r: Res) => Out,
  ): Promise<Out> {
    const signal = options?.signal;
    throwIfAborted(signal, operation);
    // One call, one connection: a failed attempt (refused, or past a deadline) is not retried by
    // grpc-js within the call either; the call fails and the caller picks its next endpoint.
    const credentials = new AttestedChannelCredentials({
      oneAttempt: true,
      issuer: this.options.issuer,
      clock: this.options.clock,
      ...(this.options.validators ? { validators: this.options.validators } : {}),
      ...(this.options.handshakeTimeoutMs !== undefined
        ? { handshakeTimeoutMs: this.options.handshakeTimeoutMs }
        : {}),
      ...(this.options.localAddress !== undefined ? { localAddress: this.options.localAddress } : {}),
      ...(this.options.tlsHandshakeTimeoutMs !== undefined
        ? { tlsHandshakeTimeoutMs: this.options.tlsHandshakeTimeoutMs }
        : {}),
    });
    const connectMs = this.options.connectTimeoutMs ?? DEFAULT_JOIN_CONNECT_TIMEOUT_MS;
    const client = new JoinAPIClient(credentials.target(endpoint), credentials, {
      'grpc.use_local_subchannel_pool': 1,
      // A channel per call: grpc-js's channelz registration (on by default) would be pure cost.
      'grpc.enable_channelz': 0,
    });
    try {
      return await new Promise<Out>((resolve, reject) => {
        const call = invoke(
          client,
          new Metadata(),
          { deadline: deadlineFrom(options, this.options.defaultTimeoutMs ?? DEFAULT_JOIN_CALL_TIMEOUT_MS) },
          (err, res) => {
            // One call, one connection: grpc-js would reconnect after a refusal, in the background.
            credentials.finish();
            clearTimeout(connectTimer);
            signal?.removeEventListener('abort', onAbort);
            if (err && stalled && credentials.refusal() === undefined)
              reject(
                new ConfbootError(
                  'unavailable',
                  `${operation}: no attested connection within ${connectMs} ms (the endpoint does not answer)`,
                ),
              );
            else if (err) reject(callError(err, operation, credentials, signal));
            else resolve(fromProto(res));
          },
        );
        const onAbort = () => call.cancel();
        signal?.addEventListener('abort', onAbort, { once: true });
        // A stalling endpoint (no TCP answer, or one that never finishes the handshake or never
        // sends its attested TLS frame) costs at most the connect deadline, not the whole call
        // deadline; a service that answered and is still verifying this node is waited for.
        let stalled = false;
        const connectTimer = setTimeout(() => {
          stalled = true;
          credentials.finish();
          call.cancel();
        }, connectMs);
        connectTimer.unref();
        void credentials.answered.then(() => clearTimeout(connectTimer));
      });
    } catch (err) {
      // A refused connection (nothing listens yet) is the caller's to report: a node retries it
      // several times a second until its join service starts.
      const level = reasonOf(err) === CONNECTION_REFUSED ? 'debug' : 'warn';
      this.options.logger?.[level]('Join service call failed', {
        endpoint,
        reason: messageOf(err),
      });
      throw err;
    } finally {
      client.close();
    }
  }
}
