/**
 * confboot library API. Ports (interfaces + DI tokens) are re-exported here and from `confboot/ports`;
 * domain logic and adapters are added as they land.
 */
export * from './ports/index.js';
export { VERSION } from './version.js';
