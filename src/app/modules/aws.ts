/**
 * The AWS node module (app layer, DI wiring): MetadataAPI on IMDSv2 and the EC2, Tagging and ELBv2
 * APIs; the Issuer is the node's variant's (cloud-wiring.ts). The AWS SDK clients are loaded lazily
 * by the adapter.
 */

import type { ContainerModule } from 'inversify';
import { AwsMetadataAPI } from '../../adapters/cloud/aws/metadata-api.js';
import { cloudBindingsModule, type MetadataFactory } from './cloud-wiring.js';

/** npm packages of this cloud's SDK. */
export const SDK_PACKAGES: readonly string[] = Object.freeze([
  '@aws-sdk/client-ec2',
  '@aws-sdk/client-resource-groups-tagging-api',
  '@aws-sdk/client-elastic-load-balancing-v2',
]);

/** Loads this cloud's SDK now; for the module-isolation check (`--preload-sdk`). */
export async function preloadSdk(): Promise<void> {
  await Promise.all([
    import('@aws-sdk/client-ec2'),
    import('@aws-sdk/client-resource-groups-tagging-api'),
    import('@aws-sdk/client-elastic-load-balancing-v2'),
  ]);
}

/** The AWS metadata API of a node or join service. */
export const metadataApi: MetadataFactory = (c, logger) =>
  new AwsMetadataAPI({
    ...(c.metadata.baseUrl === undefined ? {} : { imdsBaseUrl: c.metadata.baseUrl }),
    ...(c.metadata.apiEndpoint === undefined ? {} : { endpoint: c.metadata.apiEndpoint }),
    logger,
  });

/** The AWS module: binds MetadataAPI and Issuer (cloud-wiring.ts). */
export function cloudModule(): ContainerModule {
  return cloudBindingsModule(metadataApi);
}
