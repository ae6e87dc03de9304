/** COPY-ME TEMPLATE: the provider's index (src/adapters/cloud/<cloud>/index.ts). Export only this cloud's names. */
export { ExampleMetadataAPI, type ExampleMetadataAPIOptions } from './metadata-api.js';
