/**
 * The GCP node module (app layer, DI wiring): MetadataAPI on the GCE metadata server and the Compute
 * API, and the gcp-sev-es Issuer (vTPM quote, the kernel's event log, and GCE instance info read from
 * the metadata server). The Compute SDK is loaded lazily by the adapter, on first use only.
 *
 * Both GCP variants quote with GCE's pre-provisioned attestation key, as upstream does
 * (go-tpm-tools `GceAttestationKeyRSA`): the validators trust only the key the instance's shielded
 * identity names, which is the endorsement-hierarchy primary key made from the template GCE keeps in
 * NV index 0x01c10001. This module tells the common module's TPM so ({@link GCE_TPM_OPTIONS}).
 */

import { ContainerModule } from 'inversify';
import { ConfigfsTsmDevice } from '../../adapters/attestation/snp/configfs-tsm.js';
import { createGcpSevSnpIssuer } from '../../adapters/attestation/snp/issuers.js';
import { LINUX_EVENT_LOG_PATH } from '../../adapters/attestation/vtpm/issuer.js';
import { gceInstanceInfo } from '../../adapters/cloud/gcp/instance-info.js';
import { DEFAULT_GCE_METADATA_URL, GcpMetadataAPI } from '../../adapters/cloud/gcp/metadata-api.js';
import { GCE_AK_TEMPLATE_NV_INDEX_RSA } from '../../adapters/tpm/nv-template-ak.js';
import { cloudBindingsModule, cloudVtpmIssuer } from './cloud-wiring.js';
import { CloudTpmOptions } from './common.js';

/**
 * The node TPM's attestation key on GCE: the RSA AK GCE provisions, a primary key in the endorsement
 * hierarchy made from the template in NV index 0x01c10001 (persisted at the node's AK handle).
 */
export const GCE_TPM_OPTIONS: Readonly<CloudTpmOptions> = Object.freeze({
  akTemplateNvIndex: GCE_AK_TEMPLATE_NV_INDEX_RSA,
  akTemplateHierarchy: 'endorsement',
});

/** npm packages of this cloud's SDK. */
export const SDK_PACKAGES: readonly string[] = Object.freeze(['@google-cloud/compute']);

/** Loads this cloud's SDK now; for the module-isolation check (`--preload-sdk`). */
export async function preloadSdk(): Promise<void> {
  await import('@google-cloud/compute');
}

/** Splits an API endpoint URL (`http://127.0.0.1:8443`) into the Compute SDK's options. */
function computeEndpoint(url: string | undefined): {
  apiEndpoint?: string;
  port?: number;
  protocol?: 'http' | 'https';
} {
  if (url === undefined) return {};
  const u = new URL(url);
  const protocol = u.protocol === 'http:' ? 'http' : 'https';
  return {
    apiEndpoint: u.hostname,
    protocol,
    ...(u.port === '' ? {} : { port: Number(u.port) }),
  };
}

/**
 * The GCP module: binds MetadataAPI and Issuer (cloud-wiring.ts), and {@link CloudTpmOptions} so the
 * node's TPM quotes with GCE's AK ({@link GCE_TPM_OPTIONS}).
 */
export function cloudModule(): ContainerModule {
  const bindings = cloudBindingsModule({
    metadata: (c, logger) =>
      new GcpMetadataAPI({
        ...(c.metadata.baseUrl === undefined ? {} : { metadataBaseUrl: c.metadata.baseUrl }),
        ...computeEndpoint(c.metadata.apiEndpoint),
        logger,
      }),
    issuer: (c, tpm) =>
      c.variant === 'gcp-sev-snp'
        ? createGcpSevSnpIssuer({
            tpm,
            device: new ConfigfsTsmDevice({ kind: 'sev-snp' }),
            gceInstance: (options) =>
              gceInstanceInfo(c.metadata.baseUrl ?? DEFAULT_GCE_METADATA_URL, options),
            eventLogPath: LINUX_EVENT_LOG_PATH,
          })
        : cloudVtpmIssuer('gcp-sev-es', (cfg, options) =>
            gceInstanceInfo(cfg.metadata.baseUrl ?? DEFAULT_GCE_METADATA_URL, options),
          )(c, tpm),
  });
  return new ContainerModule((options) => {
    options.bind<CloudTpmOptions>(CloudTpmOptions).toConstantValue(GCE_TPM_OPTIONS);
    return bindings.load(options);
  });
}
