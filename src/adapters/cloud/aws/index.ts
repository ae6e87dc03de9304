/** AWS provider. The AWS SDK clients load only when an AwsMetadataAPI first calls AWS. */

export { awsInstanceIdentity } from './instance-identity.js';
export {
  AwsMetadataAPI,
  type AwsMetadataAPIOptions,
  type AwsStaticCredentials,
  DEFAULT_AWS_IMDS_URL,
} from './metadata-api.js';
