/**
 * The AWS node module (app layer, DI wiring): MetadataAPI on IMDSv2 and the EC2, Tagging and ELBv2
 * APIs, and the aws-nitro-tpm Issuer (vTPM quote, the kernel's event log, and the IMDS instance
 * identity document as instance info). The AWS SDK clients are loaded lazily by the adapter.
 */
import { ContainerModule } from 'inversify';
import { LINUX_EVENT_LOG_PATH, VtpmIssuer } from '../../adapters/attestation/vtpm/issuer.js';
import { AwsMetadataAPI, DEFAULT_AWS_IMDS_URL } from '../../adapters/cloud/aws/metadata-api.js';
import { expectOk, httpRequest } from '../../adapters/cloud/shared/http.js';
import { wrapError } from '../../ports/errors.js';
import { Issuer } from '../../ports/issuer.js';
import { Logger } from '../../ports/logger.js';
import { MetadataAPI } from '../../ports/metadata-api.js';
import { Tpm } from '../../ports/tpm.js';
import type { CallOptions } from '../../ports/types.js';
import { NodeConfig } from './node-config.js';

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

/**
 * Reads the IMDSv2 instance identity document (a session token first, then the document), the
 * instance info of aws-nitro-tpm (REFERENCE §4.2).
 */
export async function awsInstanceIdentity(baseUrl: string, options?: CallOptions): Promise<Uint8Array> {
  const root = baseUrl.replace(/\/+$/, '');
  const signal = options?.signal ? { signal: options.signal } : {};
  try {
    const tokenRes = await httpRequest({
      url: `${root}/latest/api/token`,
      method: 'PUT',
      headers: { 'X-aws-ec2-metadata-token-ttl-seconds': '60' },
      ...signal,
    });
    const token = expectOk(tokenRes, 'IMDSv2 session token').body.toString('utf8').trim();
    const doc = await httpRequest({
      url: `${root}/latest/dynamic/instance-identity/document`,
      headers: { 'X-aws-ec2-metadata-token': token },
      ...signal,
    });
    return new Uint8Array(expectOk(doc, 'IMDS instance identity document').body);
  } catch (err) {
    throw wrapError('reading AWS instance identity document', err, 'unavailable');
  }
}

/** The AWS module: binds {@link MetadataAPI} and {@link Issuer}. */
export function cloudModule(): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<MetadataAPI>(MetadataAPI)
      .toResolvedValue(
        (c: NodeConfig, logger: Logger) =>
          new AwsMetadataAPI({
            ...(c.metadata.baseUrl === undefined ? {} : { imdsBaseUrl: c.metadata.baseUrl }),
            ...(c.metadata.apiEndpoint === undefined ? {} : { endpoint: c.metadata.apiEndpoint }),
            logger,
          }),
        [NodeConfig, Logger],
      )
      .inSingletonScope();
    bind<Issuer>(Issuer)
      .toResolvedValue(
        (c: NodeConfig, tpm: Tpm) =>
          new VtpmIssuer({
            variant: 'aws-nitro-tpm',
            tpm,
            instanceInfo: (_extraData, options) =>
              awsInstanceIdentity(c.metadata.baseUrl ?? DEFAULT_AWS_IMDS_URL, options),
            eventLogPath: LINUX_EVENT_LOG_PATH,
          }),
        [NodeConfig, Tpm],
      )
      .inSingletonScope();
  });
}
