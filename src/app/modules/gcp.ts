/**
 * The GCP node module (app layer, DI wiring): MetadataAPI on the GCE metadata server and the Compute
 * API; the Issuer is the node's variant's (cloud-wiring.ts). The Compute SDK is loaded lazily by the
 * adapter, on first use only.
 *
 * Both GCP variants quote with GCE's pre-provisioned attestation key, as upstream does
 * (go-tpm-tools `GceAttestationKeyRSA`): the validators trust only the key the instance's shielded
 * identity names, which is the endorsement-hierarchy primary key made from the template GCE keeps in
 * NV index 0x01c10001. The cloud registry's TPM defaults for gcp say so.
 */

import type { ContainerModule } from 'inversify';
import { GcpMetadataAPI } from '../../adapters/cloud/gcp/metadata-api.js';
import { cloudBindingsModule, type MetadataFactory } from './cloud-wiring.js';

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

/** The GCP metadata API of a node or join service. */
export const metadataApi: MetadataFactory = (c, logger) =>
  new GcpMetadataAPI({
    ...(c.metadata.baseUrl === undefined ? {} : { metadataBaseUrl: c.metadata.baseUrl }),
    ...computeEndpoint(c.metadata.apiEndpoint),
    logger,
  });

/** The GCP module: binds MetadataAPI and Issuer (cloud-wiring.ts). */
export function cloudModule(): ContainerModule {
  return cloudBindingsModule(metadataApi);
}
