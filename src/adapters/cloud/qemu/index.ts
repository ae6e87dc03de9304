/** QEMU provider: the metadata client and the metadata server. Loads no cloud SDK. */
export { type Lease, parseLeases, readLeases, type WireInstanceMetadata } from './leases.js';
export { DEFAULT_QEMU_METADATA_URL, QemuMetadataAPI, type QemuMetadataAPIOptions } from './metadata-api.js';
export {
  type MetadataServerOptions,
  type RunningMetadataServer,
  startMetadataServer,
} from './metadata-server.js';
