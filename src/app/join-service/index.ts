/** The join service as a program (application layer): composition, operations parts and production wiring. */

export * from '../../adapters/ops/grpc-health.js';
export * from '../../adapters/ops/http-server.js';
export * from '../../adapters/ops/limits.js';
export * from '../../adapters/ops/metrics.js';
export * from '../../adapters/ops/timed-validator.js';
export * from './audit.js';
export * from './guard/join-guard.js';
export type { ReceiptIssuing } from './guard/receipts.js';
export * from './guarded-join-call.js';
export * from './production.js';
export * from './service.js';
