/**
 * Contract suites, exported as `confboot/contract`. A new provider or adapter calls the suite for
 * its port with a factory returning `{ subject, seed, cleanup, supports }` (see harness.ts and
 * test/contract/README.md). Suites use Vitest's `describe`/`it`, so run them under Vitest.
 */
export * from './attestation.js';
export * from './cluster-joiner.js';
export * from './encrypted-disk.js';
export * from './harness.js';
export * from './kms.js';
export * from './metadata-api.js';
