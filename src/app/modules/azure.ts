/**
 * The Azure node module (app layer, DI wiring): MetadataAPI on IMDS and the ARM compute and network
 * APIs; the Issuer is the node's variant's (cloud-wiring.ts), each a vTPM quote with the
 * HCL-provisioned AK, which the cloud registry's TPM defaults select. The ARM SDKs are loaded
 * lazily by the adapter.
 */

import type { ContainerModule } from 'inversify';
import { AzureMetadataAPI } from '../../adapters/cloud/azure/metadata-api.js';
import { cloudBindingsModule, type MetadataFactory } from './cloud-wiring.js';

/** npm packages of this cloud's SDK. */
export const SDK_PACKAGES: readonly string[] = Object.freeze(['@azure/arm-compute', '@azure/arm-network']);

/** Loads this cloud's SDK now; for the module-isolation check (`--preload-sdk`). */
export async function preloadSdk(): Promise<void> {
  await Promise.all([import('@azure/arm-compute'), import('@azure/arm-network')]);
}

/** The Azure metadata API of a node or join service. */
export const metadataApi: MetadataFactory = (c, logger) =>
  new AzureMetadataAPI({
    ...(c.metadata.baseUrl === undefined ? {} : { imdsBaseUrl: c.metadata.baseUrl }),
    ...(c.metadata.apiEndpoint === undefined ? {} : { armEndpoint: c.metadata.apiEndpoint }),
    logger,
  });

/** The Azure module: binds MetadataAPI and Issuer (cloud-wiring.ts). */
export function cloudModule(): ContainerModule {
  return cloudBindingsModule(metadataApi);
}
