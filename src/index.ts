/**
 * confboot library API: ports (interfaces + DI tokens, also at `confboot/ports`), the pure domain
 * (join flow, init flow, node lock, ticket issuance, measurements, key derivation), the bootstrapper
 * and node wiring, and the adapters a service needs to embed confboot (see docs/embedding.md).
 * Contract suites are at `confboot/contract`. Cloud SDKs load only when their provider is used.
 */

export {
  diffMeasurementsAgainstLog,
  type EventLogReplay,
  type MeasuredEvent,
  type MeasurementsBlock,
  type MeasurementsFromLog,
  measurementsFromReplay,
  type PcrDiff,
  pcrResetValue,
  REPLAY_BANKS,
  type ReplayBank,
  replayTcgEventLog,
} from './adapters/attestation/eventlog/measurements.js';
export {
  parseEventLog,
  replayEventLog,
  type TcgEvent,
  type TcgEventLog,
} from './adapters/attestation/eventlog/tcg-log.js';
export {
  IntelPcsCollateralSource,
  type IntelPcsOptions,
} from './adapters/attestation/tdx/pcs-client.js';
export { createQemuVtpmIssuer, VtpmIssuer } from './adapters/attestation/vtpm/issuer.js';
export { GrpcInitClient } from './adapters/grpc/init-client.js';
export { createInitServer, type InitServiceHandler } from './adapters/grpc/init-server.js';
export { GrpcJoinTicketClient } from './adapters/grpc/join-client.js';
export { createJoinServer, type JoinServerOptions } from './adapters/grpc/join-server.js';
export { ClusterKmsFactory } from './adapters/kms/cluster-kms-factory.js';
export { HkdfKms } from './adapters/kms/hkdf-kms.js';
export { createPinoLogger } from './adapters/log/pino-logger.js';
export { FileCertificateAuthority } from './adapters/pki/file-certificate-authority.js';
export { CryptoRandom } from './adapters/system/crypto-random.js';
export { SystemClock } from './adapters/system/system-clock.js';
export { Pcr15Marker } from './adapters/tpm/pcr15-marker.js';
export { Tpm2ToolsTpm } from './adapters/tpm/tpm2-tools-tpm.js';
export {
  type BootstrapperNode,
  type BootstrapperNodeDeps,
  type BootstrapperNodeOptions,
  startBootstrapperNode,
} from './app/bootstrapper/node.js';
export { startJoinService } from './app/join-service/service.js';
export {
  bootstrapperDeps,
  CSPS,
  checkWiring,
  cloudModule,
  commonModule,
  createNodeContainer,
  ISSUER_VARIANTS_BY_CSP,
  NodeConfig,
  nodeConfig,
  VARIANTS_BY_CSP,
} from './app/modules/index.js';
export {
  CLOUDS,
  cloudNames,
  cloudVariants,
  registerCloud,
  registerVariant,
  VARIANTS,
  type VariantEntry,
  variantNames,
  variantOfOid,
  variantOid,
  vtpmVariant,
} from './app/registry/index.js';
export type { ValidatorDeps } from './app/registry/validator-deps.js';
export { buildValidator, createValidator, type ValidatorConfig } from './app/registry/validators.js';
export * from './domain/index.js';
export * from './ports/index.js';
export { VERSION } from './version.js';
