/** The join service as a program (application layer): composition, operations parts and production wiring. */
export * from './grpc-health.js';
export * from './guarded-handler.js';
export * from './http-server.js';
export * from './limits.js';
export * from './metrics.js';
export * from './production.js';
export * from './service.js';
export * from './timed-validator.js';
