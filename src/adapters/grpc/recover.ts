/**
 * The recovery edge (adapter layer, src/adapters/grpc): recoverproto.API over attested TLS.
 * - Server (a control plane waiting for recovery): this node attests with its Issuer; the caller
 *   verifies it. {@link AttestedRecoveryEndpoint} serves a {@link RecoveryHandler} until told to
 *   stop, as the {@link RecoveryEndpoint} port. Callers are not attested, so everything a caller
 *   can hold is bounded per connection and per source: one call per connection, connections closed
 *   when idle and at a maximum age, and attested connections capped per source (IPv4 address or
 *   IPv6 /64) besides the cap in total ({@link RECOVERY_CONNECTION_LIMITS}).
 * - Client (`confboot recover`): validates the node's attestation with the cluster's Validators
 *   before a single request byte is sent, then sends the master secret (upstream's `kms_uri`) or one
 *   share file. One call, one connection.
 */
import { Metadata, type ServerUnaryCall, type sendUnaryData, status } from '@grpc/grpc-js';
import {
  APIClient as RecoverAPIClient,
  APIService as RecoverAPIService,
  type RecoverMessage,
  type RecoverResponse,
} from '../../gen/recover.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, isConfbootError, messageOf } from '../../ports/errors.js';
import type { Issuer } from '../../ports/issuer.js';
import type { Logger } from '../../ports/logger.js';
import { callerIp, peerHost } from '../../ports/peer-address.js';
import type {
  RecoverRequest,
  RecoverStatus,
  RecoveryEndpoint,
  RecoveryHandler,
} from '../../ports/recovery-endpoint.js';
import type { CallOptions } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import { AttestedChannelCredentials } from './atls/credentials.js';
import type { AttestedPeer } from './atls/peer-attestation.js';
import { AttestedGrpcServer } from './attested-server.js';
import { clusterKmsUri, NO_STORE_URI, parseClusterKmsUri } from './kms-uri.js';
import { toGrpcError } from './status.js';
import { callError, deadlineFrom, throwIfAborted } from './unary-call.js';

/** Upstream's recovery port. */
export const RECOVERY_PORT = 9999;
/** Largest recovery message accepted (a share file is at most 64 KiB). */
export const MAX_RECOVER_MESSAGE_BYTES = 128 * 1024;

/** The bounds on recovery connections (each overridable in {@link RecoveryEndpointOptions}). */
export const RECOVERY_CONNECTION_LIMITS = {
  /** Attested connections open at once. */
  maxConnections: 16,
  /** Attested connections open at once from one source (IPv4 address or IPv6 /64). */
  maxConnectionsPerSource: 2,
  /** A connection without a call in flight for this long is closed, ms. */
  idleMs: 5_000,
  /** A connection is closed this long after it was attested (grpc-js adds ±10 % jitter), ms. */
  maxAgeMs: 20_000,
  /** A call still running at the maximum age may finish within this, ms. */
  maxAgeGraceMs: 10_000,
} as const;

/** Maps a proto message to the port's request; `invalid-argument` for anything else. */
export function recoverRequestFromProto(msg: RecoverMessage): RecoverRequest {
  const hasShare = msg.share.length > 0;
  const hasUri = msg.kmsUri !== '';
  if (hasShare === hasUri)
    throw new ConfbootError(
      'invalid-argument',
      'recovery: send either kms_uri or share, not both or neither',
    );
  if (hasShare) return { kind: 'share', share: new Uint8Array(msg.share) };
  if (msg.storageUri !== '' && msg.storageUri !== NO_STORE_URI)
    throw new ConfbootError('invalid-argument', `recovery: only storage URI "${NO_STORE_URI}" is supported`);
  const { masterSecret, salt } = parseClusterKmsUri(msg.kmsUri);
  return { kind: 'master-secret', masterSecret, salt };
}

/** Maps the port's request to the proto message. */
export function recoverRequestToProto(request: RecoverRequest): RecoverMessage {
  return request.kind === 'share'
    ? { kmsUri: '', storageUri: '', share: Buffer.from(request.share) }
    : {
        kmsUri: clusterKmsUri(request.masterSecret, request.salt),
        storageUri: NO_STORE_URI,
        share: Buffer.alloc(0),
      };
}

/** Options of {@link AttestedRecoveryEndpoint}. */
export interface RecoveryEndpointOptions {
  /** This node's issuer: it attests to the operator. */
  issuer: Issuer;
  clock: Clock;
  host: string;
  port: number;
  logger?: Logger;
  handshakeTimeoutMs?: number;
  /** Attested connections open at once (default 16). */
  maxConnections?: number;
  /** Attested connections open at once from one source (default 2). */
  maxConnectionsPerSource?: number;
  /** Idle time after which a connection is closed, ms (default 5 s). */
  idleMs?: number;
  /** Age at which a connection is closed, ms (default 20 s, then 10 s grace for a call in flight). */
  maxAgeMs?: number;
  /** How long stopping waits for a call in flight, ms (default 5 s). */
  shutdownGraceMs?: number;
  /** Called with the bound port once listening. */
  onListening?: (port: number) => void;
}

/** Serves recoverproto.API over attested TLS while asked to; see the module comment. */
export class AttestedRecoveryEndpoint implements RecoveryEndpoint {
  constructor(private readonly options: RecoveryEndpointOptions) {}

  async serve(handler: RecoveryHandler, options: { signal: AbortSignal }): Promise<void> {
    const o = this.options;
    const log = o.logger;
    const server = new AttestedGrpcServer({
      issuer: o.issuer,
      clock: o.clock,
      ...(log ? { logger: log } : {}),
      ...(o.handshakeTimeoutMs === undefined ? {} : { handshakeTimeoutMs: o.handshakeTimeoutMs }),
      maxConnections: o.maxConnections ?? RECOVERY_CONNECTION_LIMITS.maxConnections,
      maxConnectionsPerSource:
        o.maxConnectionsPerSource ?? RECOVERY_CONNECTION_LIMITS.maxConnectionsPerSource,
      grpcOptions: {
        'grpc.max_receive_message_length': MAX_RECOVER_MESSAGE_BYTES,
        // One call at a time on a connection; `called` below refuses a second one.
        'grpc.max_concurrent_streams': 1,
        'grpc.max_connection_idle_ms': o.idleMs ?? RECOVERY_CONNECTION_LIMITS.idleMs,
        'grpc.max_connection_age_ms': o.maxAgeMs ?? RECOVERY_CONNECTION_LIMITS.maxAgeMs,
        'grpc.max_connection_age_grace_ms': RECOVERY_CONNECTION_LIMITS.maxAgeGraceMs,
      },
    });
    let inFlight = 0;
    /** Connections (their attested peers) that have made their one call. */
    const called = new WeakSet<AttestedPeer>();
    const recover = async (
      call: ServerUnaryCall<RecoverMessage, RecoverResponse>,
      callback: sendUnaryData<RecoverResponse>,
    ): Promise<void> => {
      const operation = `recovering for ${call.getPeer()}`;
      const peer = server.peerOf(call);
      if (peer === undefined) {
        const details = `${operation}: connection is not attested`;
        callback({ code: status.PERMISSION_DENIED, details, message: details });
        return;
      }
      if (called.has(peer)) {
        const details = `${operation}: one call per connection; connect again`;
        callback({ code: status.RESOURCE_EXHAUSTED, details, message: details });
        return;
      }
      called.add(peer);
      // The call's cancellation (the caller gave up or went away) reaches a wait for the disk.
      const cancelled = new AbortController();
      call.once('cancelled', () => cancelled.abort());
      inFlight++;
      try {
        const s = await handler.recover(recoverRequestFromProto(call.request), {
          signal: cancelled.signal,
          peerAddress: callerIp(call.getPeer()) ?? peerHost(call.getPeer()),
        });
        log?.info('Recovery call answered', {
          peer: call.getPeer(),
          recovered: s.recovered,
          received: s.received,
        });
        callback(null, {
          recovered: s.recovered,
          received: s.received,
          threshold: s.threshold,
          total: s.total,
          message: s.message,
        });
      } catch (err) {
        const e = toGrpcError(err, operation);
        log?.warn('Recovery call refused', {
          peer: call.getPeer(),
          code: status[e.code],
          reason: e.details,
          ...(isConfbootError(err) ? {} : { cause: messageOf(err) }),
        });
        callback(e);
      } finally {
        inFlight--;
      }
    };
    server.grpc.addService(RecoverAPIService, {
      recover: (call: ServerUnaryCall<RecoverMessage, RecoverResponse>, cb: sendUnaryData<RecoverResponse>) =>
        void recover(call, cb),
    });
    if (options.signal.aborted) return;
    let port: number;
    try {
      port = await server.listen(o.host, o.port);
    } catch (err) {
      await server.shutdown(0).catch(() => {});
      throw new ConfbootError(
        'unavailable',
        `recovery endpoint: listening on ${o.host}:${o.port}: ${messageOf(err)}`,
        {
          cause: err,
        },
      );
    }
    log?.info('Recovery endpoint listening', { host: o.host, port });
    o.onListening?.(port);
    await new Promise<void>((resolve) => {
      if (options.signal.aborted) resolve();
      else options.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    // The call that completed recovery ended it: let its answer reach the holder (its connection
    // closes once it has read it) before the server goes, within the grace period.
    const graceMs = o.shutdownGraceMs ?? 5_000;
    const deadline = Date.now() + graceMs;
    await new Promise<void>((resolve) => {
      const tick = () => {
        if ((inFlight === 0 && server.connections === 0) || Date.now() >= deadline) resolve();
        else setTimeout(tick, 20).unref();
      };
      tick();
    });
    await server.shutdown(Math.max(0, deadline - Date.now()));
    log?.info('Recovery endpoint stopped');
  }
}

/** Options of {@link GrpcRecoverClient}. */
export interface GrpcRecoverClientOptions {
  /** Validators for the node's attestation (at least one): the cluster's measurements. */
  validators: readonly Validator[];
  clock: Clock;
  /** Bound on the whole call when CallOptions has none (default 60 s). */
  defaultTimeoutMs?: number;
  handshakeTimeoutMs?: number;
  /** Local address the connection leaves from (IPv4 or IPv6 literal); default: the system's choice. */
  localAddress?: string;
}

/** A recovery call's answer and the attested node that gave it. */
export interface RecoverOutcome {
  status: RecoverStatus;
  server: AttestedPeer | undefined;
}

/** Calls Recover on a node over attested TLS, verifying the node before sending anything. */
export class GrpcRecoverClient {
  constructor(private readonly options: GrpcRecoverClientOptions) {
    if (options.validators.length === 0)
      throw new Error('recover client: at least one validator is required');
  }

  /**
   * Sends `request` to the node at `endpoint` (`host:port`). Rejects with an AttestationError when
   * the node's attestation fails (nothing was sent), or a ConfbootError with the node's refusal.
   */
  async recover(endpoint: string, request: RecoverRequest, options?: CallOptions): Promise<RecoverOutcome> {
    const operation = `recovering node at ${endpoint}`;
    const signal = options?.signal;
    throwIfAborted(signal, operation);
    const credentials = new AttestedChannelCredentials({
      oneAttempt: true,
      validators: this.options.validators,
      clock: this.options.clock,
      ...(this.options.handshakeTimeoutMs === undefined
        ? {}
        : { handshakeTimeoutMs: this.options.handshakeTimeoutMs }),
      ...(this.options.localAddress === undefined ? {} : { localAddress: this.options.localAddress }),
    });
    const client = new RecoverAPIClient(credentials.target(endpoint), credentials, {
      'grpc.use_local_subchannel_pool': 1,
    });
    try {
      return await new Promise<RecoverOutcome>((resolve, reject) => {
        const call = client.recover(
          recoverRequestToProto(request),
          new Metadata(),
          { deadline: deadlineFrom(options, this.options.defaultTimeoutMs ?? 60_000) },
          (err, res) => {
            credentials.finish();
            signal?.removeEventListener('abort', onAbort);
            if (err) reject(callError(err, operation, credentials, signal));
            else
              resolve({
                status: {
                  recovered: res.recovered,
                  received: res.received,
                  threshold: res.threshold,
                  total: res.total,
                  message: res.message,
                },
                server: credentials.attestedPeer(),
              });
          },
        );
        const onAbort = () => call.cancel();
        signal?.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      client.close();
    }
  }
}
