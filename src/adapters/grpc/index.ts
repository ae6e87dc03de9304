/**
 * The gRPC edge of confboot (adapter layer): attested TLS for grpc-js, the join and init servers
 * and clients, the status table and the proto ⇄ domain mapping. See docs/atls.md.
 */
export * from './atls/index.js';
export {
  AttestedGrpcServer,
  type AttestedGrpcServerOptions,
  DEFAULT_SHUTDOWN_GRACE_MS,
} from './attested-server.js';
export {
  DEFAULT_INIT_TIMEOUT_MS,
  GrpcInitClient,
  type GrpcInitClientOptions,
  type InitOutcome,
  MAX_INIT_LOG_BYTES,
} from './init-client.js';
export {
  createInitServer,
  INIT_LOG_CHUNK_BYTES,
  type InitCallContext,
  type InitServerOptions,
  type InitServiceHandler,
} from './init-server.js';
export { GrpcJoinTicketClient, type GrpcJoinTicketClientOptions } from './join-client.js';
export { createJoinServer, type JoinServerOptions } from './join-server.js';
export * from './mapping.js';
export * from './status.js';
export { DEFAULT_CALL_TIMEOUT_MS } from './unary-call.js';
