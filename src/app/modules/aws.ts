/**
 * The AWS node module (app layer, DI wiring): MetadataAPI on IMDSv2 and the EC2, Tagging and ELBv2
 * APIs, and the aws-nitro-tpm Issuer (vTPM quote, the kernel's event log, and the IMDS instance
 * identity document as instance info). The AWS SDK clients are loaded lazily by the adapter.
 */

import type { ContainerModule } from 'inversify';
import { ConfigfsTsmDevice } from '../../adapters/attestation/snp/configfs-tsm.js';
import { createAwsSevSnpIssuer } from '../../adapters/attestation/snp/issuers.js';
import { LINUX_EVENT_LOG_PATH } from '../../adapters/attestation/vtpm/issuer.js';
import { awsInstanceIdentity } from '../../adapters/cloud/aws/instance-identity.js';
import { AwsMetadataAPI, DEFAULT_AWS_IMDS_URL } from '../../adapters/cloud/aws/metadata-api.js';
import { cloudBindingsModule, cloudVtpmIssuer } from './cloud-wiring.js';

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

/** The AWS module: binds MetadataAPI and Issuer (cloud-wiring.ts). */
export function cloudModule(): ContainerModule {
  return cloudBindingsModule({
    metadata: (c, logger) =>
      new AwsMetadataAPI({
        ...(c.metadata.baseUrl === undefined ? {} : { imdsBaseUrl: c.metadata.baseUrl }),
        ...(c.metadata.apiEndpoint === undefined ? {} : { endpoint: c.metadata.apiEndpoint }),
        logger,
      }),
    issuer: (c, tpm) =>
      c.variant === 'aws-sev-snp'
        ? createAwsSevSnpIssuer({
            tpm,
            device: new ConfigfsTsmDevice({ kind: 'sev-snp' }),
            eventLogPath: LINUX_EVENT_LOG_PATH,
          })
        : cloudVtpmIssuer('aws-nitro-tpm', (cfg, options) =>
            awsInstanceIdentity(cfg.metadata.baseUrl ?? DEFAULT_AWS_IMDS_URL, options),
          )(c, tpm),
  });
}
