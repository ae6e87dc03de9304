/** OpenStack provider (metadata service + Nova over plain HTTP; loads no SDK). Added from the provider template. */
export {
  DEFAULT_CUSTOM_ENDPOINT_KEY,
  DEFAULT_OPENSTACK_METADATA_URL,
  OpenStackMetadataAPI,
  type OpenStackMetadataAPIOptions,
  parseCustomEndpoint,
} from './metadata-api.js';
