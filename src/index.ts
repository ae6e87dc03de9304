/**
 * confboot library API: ports (interfaces + DI tokens, also at `confboot/ports`), the pure domain
 * (join flow, init flow, node lock, ticket issuance, measurements, key derivation) and the adapters
 * a service needs to embed confboot. Contract suites are at `confboot/contract`.
 */
export * from './domain/index.js';
export * from './ports/index.js';
export { VERSION } from './version.js';
