/** Attested TLS for grpc-js (adapter layer): public surface of src/adapters/grpc/atls. See docs/atls.md. */
export { checkPeerCertificate, createTlsIdentity, spkiHashOf, type TlsIdentity } from './certificate.js';
export {
  ClientDeadline,
  type ClientDeadlines,
  DEFAULT_CLIENT_HANDSHAKE_TIMEOUT_MS,
  DEFAULT_CLIENT_TLS_HANDSHAKE_MS,
} from './client-deadline.js';
export { type AttestSocketExtras, attestSocket, closeSoon } from './connection.js';
export {
  type AtlsCredentialsOptions,
  AttestedChannelCredentials,
  type ConnectOutcome,
  type SecureConnector,
} from './credentials.js';
export {
  type AtlsOptions,
  DEFAULT_HANDSHAKE_TIMEOUT_MS,
  type ExchangeBudget,
  exchangeAttestations,
  exporterNonce,
  type HandshakeBudget,
  type TlsRole,
} from './exchange.js';
export {
  assertGrpcJsInternals,
  checkGrpcJsInternals,
  type GrpcJsInternalsReport,
  SUPPORTED_GRPC_JS,
} from './grpc-hook.js';
export {
  ALPN_PROTOCOL,
  CLOCK_JUMP_TOLERANCE_MS,
  DEFAULT_ROTATE_EVERY_MS,
  processTlsIdentity,
  RotatingTlsIdentity,
  type RotatingTlsIdentityOptions,
  type SharedTlsIdentity,
} from './identity-pool.js';
export {
  type AtlsListenerOptions,
  type AttestedConnectionHandler,
  AttestedTlsListener,
  type RefusedConnectionHandler,
} from './listener.js';
export {
  type AttestedPeer,
  type PeerAttestation,
  type RefusedEvidence,
  verifyPeerAttestation,
} from './peer-attestation.js';
export * from './protocol.js';
