/**
 * The QEMU node module (app layer, DI wiring): MetadataAPI through the QEMU metadata server; the
 * Issuer is the node's variant's (cloud-wiring.ts). It loads no cloud SDK at all.
 */
import type { ContainerModule } from 'inversify';
import { QemuMetadataAPI } from '../../adapters/cloud/qemu/metadata-api.js';
import { cloudBindingsModule, type MetadataFactory } from './cloud-wiring.js';

/** npm packages of this cloud's SDK (none for QEMU). */
export const SDK_PACKAGES: readonly string[] = Object.freeze([]);

/** Loads this cloud's SDK now (nothing for QEMU); for the module-isolation check. */
export async function preloadSdk(): Promise<void> {}

/** The QEMU metadata server client of a node or join service. */
export const metadataApi: MetadataFactory = (c, logger) =>
  new QemuMetadataAPI({
    ...(c.metadata.baseUrl === undefined ? {} : { baseUrl: c.metadata.baseUrl }),
    ...(c.metadata.localAddress === undefined ? {} : { localAddress: c.metadata.localAddress }),
    logger,
  });

/** The QEMU module: binds MetadataAPI and Issuer (cloud-wiring.ts). */
export function cloudModule(): ContainerModule {
  return cloudBindingsModule(metadataApi);
}
