/**
 * `confboot/verify`: offline verification of attestation evidence for services that only verify.
 * One function, {@link verifyAttestation}, checks a node's attestation document of any production
 * variant (vTPM variants with the AK trust the caller has; SEV-SNP and TDX with their certificate
 * chains against the attestation config's anchors), a raw go-tpm-tools attestation, an SEV-SNP
 * report, a TDX quote, or an AWS NitroTPM document, and returns the verdict with every check.
 *
 * This entry's import graph (dynamic imports included) holds no cloud SDK, no
 * @kubernetes/client-node and no @grpc/grpc-js, so it works from an install without confboot's
 * optional peer dependencies, and a bundler never has to resolve them.
 */
export {
  type AkTrustInput,
  DOCUMENT_VARIANTS,
  type DocumentValidatorOptions,
  type DocumentVariant,
  documentValidator,
} from './app/verify/document-validators.js';
export {
  type DocumentRequest,
  type GoTpmToolsRequest,
  type NitroTpmRequest,
  type SnpReportRequest,
  type TdxQuoteRequest,
  type VerifyRequest,
  type VerifyResult,
  verifyAttestation,
} from './app/verify/verify-attestation.js';
export { MeasurementsPolicy, parseAttestationConfig } from './domain/measurements.js';
export type { AkRegistry } from './ports/ak-registry.js';
export type { AmdCertFetcher } from './ports/amd-cert-fetcher.js';
export type { AmiTpmSupport } from './ports/ami-tpm-support.js';
export { AttestationError, ConfbootError, isAttestationError, isConfbootError } from './ports/errors.js';
export type { GceShieldedIdentity } from './ports/gce-shielded-identity.js';
export { formatMismatch, type MeasurementPolicy } from './ports/measurement-policy.js';
export type { AttestationCheck, MeasurementMismatch } from './ports/types.js';
export type { ValidationResult, Validator } from './ports/validator.js';
