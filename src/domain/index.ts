/**
 * The domain core of confboot: pure logic of the join flow, the init flow, the node lock, ticket
 * issuance, the measurements policy and key derivation. Imports only src/ports and node:crypto;
 * src/app wires it to adapters.
 */

// The text of a measurement mismatch is defined beside the port's MeasurementMismatch type.
export { formatMismatch } from '../ports/measurement-policy.js';
export * from './backoff.js';
export * from './bootstrapper.js';
export * from './errors.js';
export * from './init-flow.js';
export * from './join-flow.js';
export * from './join-ticket-apply.js';
export * from './join-ticket-check.js';
export * from './key-derivation.js';
export * from './measurement-guard.js';
export * from './measurements.js';
export * from './node-lock.js';
export * from './receipts.js';
export * from './round-pacer.js';
export * from './state-disk.js';
export * from './ticket-issuer.js';
export {
  checkDiskUuid,
  checkKubeletCsr,
  checkRequestSizes,
  maxTicketRequestBytes,
  REQUEST_FIELD_LIMITS,
} from './ticket-request.js';
