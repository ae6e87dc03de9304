/** Azure provider. The ARM SDKs load only when an AzureMetadataAPI first calls ARM. */
export {
  type AzureAccessToken,
  DEFAULT_AZURE_IMDS_URL,
  fetchImdsCompute,
  type ImdsCompute,
  ImdsManagedIdentityCredential,
} from './imds.js';
export {
  AzureMetadataAPI,
  type AzureMetadataAPIOptions,
  type AzureTokenCredential,
  DEFAULT_ARM_ENDPOINT,
  parseScaleSetVmId,
} from './metadata-api.js';
