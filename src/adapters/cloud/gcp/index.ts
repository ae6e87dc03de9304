/** GCP provider. The Compute SDK loads only when a GcpMetadataAPI first calls the cloud. */

export { gceInstanceInfo } from './instance-info.js';
export {
  computeEndpointOptions,
  DEFAULT_GCE_METADATA_URL,
  fetchCapableAuthClient,
  type GcpAuthClient,
  GcpMetadataAPI,
  type GcpMetadataAPIOptions,
  regionOfZone,
} from './metadata-api.js';
