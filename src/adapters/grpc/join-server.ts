/**
 * The join service's gRPC edge (adapter layer, src/adapters/grpc): join.API served over attested
 * TLS where the joining node attests and this server validates (upstream: validators only, no
 * issuer). Requests and tickets are mapped to port types; handler errors go through status.ts.
 * Handlers only ever run for connections whose attestation passed.
 */
import { type ServerUnaryCall, type sendUnaryData, status } from '@grpc/grpc-js';
import {
  type IssueJoinTicketRequest,
  type IssueJoinTicketResponse,
  type IssueRejoinTicketRequest,
  type IssueRejoinTicketResponse,
  APIService as JoinAPIService,
} from '../../gen/join.js';
import type { Clock } from '../../ports/clock.js';
import { isConfbootError, messageOf } from '../../ports/errors.js';
import type { Issuer } from '../../ports/issuer.js';
import type { Logger } from '../../ports/logger.js';
import type { JoinTicket, JoinTicketRequest, RejoinTicket, RejoinTicketRequest } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import type { PeerAttestation } from './atls/exchange.js';
import type { AtlsListenerOptions } from './atls/listener.js';
import { AttestedGrpcServer } from './attested-server.js';
import {
  joinRequestFromProto,
  joinTicketToProto,
  rejoinRequestFromProto,
  rejoinTicketToProto,
} from './mapping.js';
import { type GrpcStatusError, toGrpcError } from './status.js';

/** What a join handler learns about its caller. */
export interface JoinCallContext {
  /** Caller address `ip:port`. */
  peer: string;
  /** The attested variant, e.g. `qemu-vtpm`. */
  variant: string;
  /** The full validated attestation (checks, warnings, user data). */
  attestation: PeerAttestation;
  /** Aborts when the caller cancels or the server force-closes the call (shutdown). */
  signal: AbortSignal;
}

/** The join service logic, in port types. */
export interface JoinServiceHandler {
  /** Issues a join ticket to an attested node. */
  issueJoinTicket(request: JoinTicketRequest, ctx: JoinCallContext): Promise<JoinTicket>;
  /** Issues a rejoin ticket to an attested node. */
  issueRejoinTicket(request: RejoinTicketRequest, ctx: JoinCallContext): Promise<RejoinTicket>;
}

/** Options of {@link createJoinServer}. */
export interface JoinServerOptions {
  /** Validators for the joining nodes' attestation (at least one). */
  validators: readonly Validator[];
  clock: Clock;
  handler: JoinServiceHandler;
  logger?: Logger;
  /** Optional: the join service attests itself too (mutual). Upstream does not. */
  issuer?: Issuer;
  handshakeTimeoutMs?: number;
  maxDocumentBytes?: number;
  maxPendingHandshakes?: number;
  /** Admission of unattested connections: phase deadlines, per-source cap, verification slots. */
  admission?: Pick<
    AtlsListenerOptions,
    | 'deadlines'
    | 'maxPendingPerSource'
    | 'maxConcurrentVerifications'
    | 'dropLogIntervalMs'
    | 'onEvidenceRefused'
    | 'sizedHandshakes'
  >;
  /** gRPC receive limit per message, bytes (grpc-js refuses larger ones before decoding). Default 4 MiB. */
  maxMessageBytes?: number;
  /** Concurrent streams per attested connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxStreamsPerConnection?: number;
  /** HTTP/2 session memory per connection, MiB. */
  maxSessionMemoryMib?: number;
  /** Attested connections open at once. */
  maxConnections?: number;
}

function unattested(operation: string): GrpcStatusError {
  const details = `${operation}: connection is not attested`;
  return { code: status.PERMISSION_DENIED, details, message: details };
}

/**
 * Builds the join service's gRPC server over attested TLS. Call `listen(host, port)` (resolves
 * with the bound port) and `shutdown(graceMs)`.
 */
export function createJoinServer(options: JoinServerOptions): AttestedGrpcServer {
  if (options.validators.length === 0) throw new Error('join server: at least one validator is required');
  const server = new AttestedGrpcServer({
    validators: options.validators,
    clock: options.clock,
    ...(options.issuer ? { issuer: options.issuer } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.handshakeTimeoutMs !== undefined ? { handshakeTimeoutMs: options.handshakeTimeoutMs } : {}),
    ...(options.maxDocumentBytes !== undefined ? { maxDocumentBytes: options.maxDocumentBytes } : {}),
    ...(options.maxPendingHandshakes !== undefined
      ? { maxPendingHandshakes: options.maxPendingHandshakes }
      : {}),
    ...options.admission,
    ...(options.maxConnections !== undefined ? { maxConnections: options.maxConnections } : {}),
    grpcOptions: {
      ...(options.maxMessageBytes !== undefined
        ? { 'grpc.max_receive_message_length': options.maxMessageBytes }
        : {}),
      ...(options.maxStreamsPerConnection !== undefined
        ? { 'grpc.max_concurrent_streams': options.maxStreamsPerConnection }
        : {}),
      ...(options.maxSessionMemoryMib !== undefined
        ? { 'grpc-node.max_session_memory': options.maxSessionMemoryMib }
        : {}),
    },
  });
  const log = options.logger;

  function unary<Req, Res, DReq, DRes>(
    name: string,
    fromProto: (r: Req) => DReq,
    call: (r: DReq, ctx: JoinCallContext) => Promise<DRes>,
    toProto: (r: DRes) => Res,
  ) {
    return (c: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>) => {
      const peer = server.peerOf(c);
      const operation = `${name} for ${c.getPeer()}`;
      if (peer?.attestation === undefined) {
        log?.warn('Refused call on an unattested connection', { peer: c.getPeer(), method: name });
        callback(unattested(operation));
        return;
      }
      const cancelled = new AbortController();
      c.once('cancelled', () => cancelled.abort(new Error(`${operation}: call cancelled`)));
      const ctx: JoinCallContext = {
        peer: peer.address,
        variant: peer.attestation.variant,
        attestation: peer.attestation,
        signal: cancelled.signal,
      };
      let request: DReq;
      try {
        request = fromProto(c.request);
      } catch (err) {
        callback(toGrpcError(err, operation));
        return;
      }
      call(request, ctx).then(
        (res) => callback(null, toProto(res)),
        (err: unknown) => {
          const e = toGrpcError(err, operation);
          // Handler errors carry no secrets by contract (ports/errors.ts); the cause's message is
          // logged for operators because the status sent to the caller hides non-confboot errors.
          log?.warn('Join call failed', {
            peer: ctx.peer,
            method: name,
            code: status[e.code],
            reason: e.details,
            ...(isConfbootError(err) ? {} : { cause: messageOf(err) }),
          });
          callback(e);
        },
      );
    };
  }

  server.grpc.addService(JoinAPIService, {
    issueJoinTicket: unary<IssueJoinTicketRequest, IssueJoinTicketResponse, JoinTicketRequest, JoinTicket>(
      'issuing join ticket',
      joinRequestFromProto,
      (r, ctx) => options.handler.issueJoinTicket(r, ctx),
      joinTicketToProto,
    ),
    issueRejoinTicket: unary<
      IssueRejoinTicketRequest,
      IssueRejoinTicketResponse,
      RejoinTicketRequest,
      RejoinTicket
    >(
      'issuing rejoin ticket',
      rejoinRequestFromProto,
      (r, ctx) => options.handler.issueRejoinTicket(r, ctx),
      rejoinTicketToProto,
    ),
  });
  return server;
}
