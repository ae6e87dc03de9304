/**
 * The join service's gRPC edge (adapter layer, src/adapters/grpc): join.API served over attested
 * TLS where the joining node attests and this server validates (upstream: validators only, no
 * issuer). Requests and tickets are mapped to port types and handed to the join call
 * (ports/join-call.ts); its refusals go through status.ts, their message led by the refusal's reason
 * code (`reason=deny-list issuing join ticket for …`, ports/join-refusal.ts). The join call only ever
 * runs for connections whose attestation passed.
 */
import { type ServerOptions, type ServerUnaryCall, type sendUnaryData, status } from '@grpc/grpc-js';
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
import {
  type JoinCall,
  type JoinCaller,
  type JoinDecision,
  MAX_ATTESTATION_AGE_MS,
} from '../../ports/join-call.js';
import { type JoinRefusalReason, joinRefusalReasonOf, peerRefusalMessage } from '../../ports/join-refusal.js';
import type { Logger } from '../../ports/logger.js';
import type { JoinTicket, JoinTicketRequest, RejoinTicket, RejoinTicketRequest } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import type { AdmissionSettings } from './atls/admission-settings.js';
import type { AtlsOptions } from './atls/exchange.js';
import { AttestedGrpcServer } from './attested-server.js';
import {
  joinRequestFromProto,
  joinTicketToProto,
  rejoinRequestFromProto,
  rejoinTicketToProto,
} from './mapping.js';
import { type GrpcStatusError, toGrpcError } from './status.js';

/** Options of {@link createJoinServer}: the join call, attested TLS, and its admission settings. */
export interface JoinServerOptions extends AdmissionSettings {
  /** Validators for the joining nodes' attestation (at least one). */
  validators: readonly Validator[];
  clock: Clock;
  /** The join call (ports/join-call.ts): the guarded ticket issuer. */
  joinCall: JoinCall;
  logger?: Logger;
  /** Optional: the join service attests itself too (mutual). Upstream does not. */
  issuer?: Issuer;
  /** Largest attestation document accepted (default 1 MiB). */
  maxDocumentBytes?: number;
  /** Called with the evidence of every attestation document a validator refused. */
  onEvidenceRefused?: AtlsOptions['onEvidenceRefused'];
  /** Names the variant of a refused peer's OID (the variant registry). */
  variantOfOid?: AtlsOptions['variantOfOid'];
  /** gRPC receive limit per message, bytes (grpc-js refuses larger ones before decoding). Default 4 MiB. */
  maxMessageBytes?: number;
  /** Concurrent streams per attested connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxStreamsPerConnection?: number;
  /** HTTP/2 session memory per connection, MiB. */
  maxSessionMemoryMib?: number;
}

function unattested(operation: string): GrpcStatusError {
  const details = peerRefusalMessage('attestation-missing', `${operation}: connection is not attested`);
  return { code: status.PERMISSION_DENIED, details, message: details };
}

/** The status of a refusal with `reason`: its kind's code, the message led by `reason=<code>`. */
function refusalStatus(err: unknown, reason: JoinRefusalReason, operation: string): GrpcStatusError {
  return toGrpcError(err, peerRefusalMessage(reason, operation));
}

/**
 * Builds the join service's gRPC server over attested TLS. Call `listen(host, port)` (resolves
 * with the bound port) and `shutdown(graceMs)`.
 */
export function createJoinServer(options: JoinServerOptions): AttestedGrpcServer {
  if (options.validators.length === 0) throw new Error('join server: at least one validator is required');
  const { joinCall, maxMessageBytes, maxStreamsPerConnection, maxSessionMemoryMib, ...listener } = options;
  // Every connection is closed (GOAWAY, then the grace) before its attestation is too old for a
  // ticket (at most 0.8 × 1.1 + 0.1 of the age: grpc-js adds up to 10 % jitter), so a client that
  // keeps its channel reconnects and attests again against the config in force then.
  const grpcOptions: ServerOptions = {
    'grpc.max_connection_age_ms': MAX_ATTESTATION_AGE_MS * 0.8,
    'grpc.max_connection_age_grace_ms': MAX_ATTESTATION_AGE_MS * 0.1,
  };
  if (maxMessageBytes !== undefined) grpcOptions['grpc.max_receive_message_length'] = maxMessageBytes;
  if (maxStreamsPerConnection !== undefined)
    grpcOptions['grpc.max_concurrent_streams'] = maxStreamsPerConnection;
  if (maxSessionMemoryMib !== undefined) grpcOptions['grpc-node.max_session_memory'] = maxSessionMemoryMib;
  const server = new AttestedGrpcServer({ ...listener, grpcOptions });
  const log = options.logger;

  function unary<Req, Res, DReq, DRes>(
    name: string,
    fromProto: (r: Req) => DReq,
    call: (r: DReq, caller: JoinCaller) => Promise<JoinDecision<DRes>>,
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
      const caller: JoinCaller = {
        peer: peer.address,
        variant: peer.attestation.variant,
        attestation: { ...peer.attestation, attestedAt: peer.attestedAt },
        signal: cancelled.signal,
      };
      let request: DReq;
      try {
        request = fromProto(c.request);
      } catch (err) {
        callback(refusalStatus(err, 'malformed-request', operation));
        return;
      }
      const refused = (err: unknown) => {
        const reason = joinRefusalReasonOf(err);
        const e = refusalStatus(err, reason, operation);
        // Refusals carry no secrets by contract (ports/errors.ts); the cause's message is logged
        // for operators because the status sent to the caller hides non-confboot errors.
        log?.warn('Join call failed', {
          peer: caller.peer,
          method: name,
          code: status[e.code],
          refusal: reason,
          reason: e.details,
          ...(isConfbootError(err) ? {} : { cause: messageOf(err) }),
        });
        callback(e);
      };
      call(request, caller).then(
        (decision) =>
          decision.issued ? callback(null, toProto(decision.ticket)) : refused(decision.refusal),
        refused,
      );
    };
  }

  server.grpc.addService(JoinAPIService, {
    issueJoinTicket: unary<IssueJoinTicketRequest, IssueJoinTicketResponse, JoinTicketRequest, JoinTicket>(
      'issuing join ticket',
      joinRequestFromProto,
      (r, caller) => joinCall.issueJoinTicket(r, caller),
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
      (r, caller) => joinCall.issueRejoinTicket(r, caller),
      rejoinTicketToProto,
    ),
  });
  return server;
}
