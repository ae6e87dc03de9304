/**
 * The first node's Init edge (adapter layer, src/adapters/grpc): init.API served over attested TLS
 * where this node attests with its Issuer to `confboot init`, which validates (upstream: issuer
 * only, no validators; mutual if validators are given). The handler yields domain stream events;
 * log chunks are split to ≤ 1024 bytes as upstream. Errors go through status.ts.
 */
import { type ServerWritableStream, status } from '@grpc/grpc-js';
import {
  APIService as InitAPIService,
  type InitResponse,
  type InitRequest as ProtoInitRequest,
} from '../../gen/init.js';
import type { Clock } from '../../ports/clock.js';
import { isConfbootError, messageOf } from '../../ports/errors.js';
import type { Issuer } from '../../ports/issuer.js';
import type { Logger } from '../../ports/logger.js';
import type { InitRequest } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import type { PeerAttestation } from './atls/peer-attestation.js';
import { AttestedGrpcServer } from './attested-server.js';
import { type InitStreamEvent, initEventToProto, initRequestFromProto } from './mapping.js';
import { toGrpcError } from './status.js';

/** Largest log chunk per stream message (upstream: 1024 bytes). */
export const INIT_LOG_CHUNK_BYTES = 1024;

/** What the init handler learns about its caller. */
export interface InitCallContext {
  /** Caller address `ip:port`. */
  peer: string;
  /** The caller's validated attestation, only in mutual mode. */
  attestation: PeerAttestation | undefined;
  /** Aborts when the caller cancels or the connection drops. */
  signal: AbortSignal;
}

/** The init logic, in port types: yields log chunks, then success, or failure followed by logs. */
export interface InitServiceHandler {
  /** Runs Init and yields what to stream back. */
  init(request: InitRequest, ctx: InitCallContext): AsyncIterable<InitStreamEvent>;
}

/** Options of {@link createInitServer}. */
export interface InitServerOptions {
  /** This node's issuer: it attests to `confboot init`. */
  issuer: Issuer;
  clock: Clock;
  handler: InitServiceHandler;
  logger?: Logger;
  /** Optional: also verify the caller (mutual). Upstream does not. */
  validators?: readonly Validator[];
  handshakeTimeoutMs?: number;
  maxDocumentBytes?: number;
}

function* split(event: InitStreamEvent): Generator<InitStreamEvent> {
  if (event.kind !== 'log' || event.chunk.length <= INIT_LOG_CHUNK_BYTES) {
    yield event;
    return;
  }
  for (let i = 0; i < event.chunk.length; i += INIT_LOG_CHUNK_BYTES)
    yield { kind: 'log', chunk: event.chunk.subarray(i, i + INIT_LOG_CHUNK_BYTES) };
}

function writeMessage(
  call: ServerWritableStream<ProtoInitRequest, InitResponse>,
  msg: InitResponse,
): Promise<void> {
  return new Promise<void>((resolve) => {
    if (call.write(msg)) resolve();
    else call.once('drain', () => resolve());
  });
}

/**
 * Builds the Init gRPC server over attested TLS (this node attests). Call `listen(host, port)` and
 * `shutdown(graceMs)`; shutdown waits up to `graceMs` for a running Init.
 */
export function createInitServer(options: InitServerOptions): AttestedGrpcServer {
  const server = new AttestedGrpcServer({
    issuer: options.issuer,
    clock: options.clock,
    ...(options.validators ? { validators: options.validators } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.handshakeTimeoutMs !== undefined ? { handshakeTimeoutMs: options.handshakeTimeoutMs } : {}),
    ...(options.maxDocumentBytes !== undefined ? { maxDocumentBytes: options.maxDocumentBytes } : {}),
    grpcOptions: { 'grpc.keepalive_time_ms': 15_000 },
  });
  const log = options.logger;
  const mutual = (options.validators ?? []).length > 0;

  async function init(call: ServerWritableStream<ProtoInitRequest, InitResponse>): Promise<void> {
    const operation = `initialising cluster for ${call.getPeer()}`;
    const peer = server.peerOf(call);
    if (peer === undefined || (mutual && peer.attestation === undefined)) {
      log?.warn('Refused call on an unattested connection', { peer: call.getPeer(), method: 'init' });
      const details = `${operation}: connection is not attested`;
      call.emit('error', { code: status.PERMISSION_DENIED, details, message: details });
      return;
    }
    const controller = new AbortController();
    call.once('cancelled', () => controller.abort(new Error('init call cancelled by the caller')));
    const ctx: InitCallContext = {
      peer: peer.address,
      attestation: peer.attestation,
      signal: controller.signal,
    };
    try {
      const request = initRequestFromProto(call.request);
      for await (const event of options.handler.init(request, ctx)) {
        if (call.cancelled) break;
        for (const part of split(event)) await writeMessage(call, initEventToProto(part));
      }
      call.end();
    } catch (err) {
      const e = toGrpcError(err, operation);
      log?.warn('Init call failed', {
        peer: ctx.peer,
        code: status[e.code],
        reason: e.details,
        ...(isConfbootError(err) ? {} : { cause: messageOf(err) }),
      });
      call.emit('error', e);
    }
  }

  server.grpc.addService(InitAPIService, {
    init: (call: ServerWritableStream<ProtoInitRequest, InitResponse>) => void init(call),
  });
  return server;
}
