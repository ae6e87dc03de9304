/**
 * The QEMU node module (app layer, DI wiring): MetadataAPI through the QEMU metadata server and the
 * Issuer of the chosen variant (qemu-vtpm on the node's TPM, or qemu-tdx through configfs-tsm). It
 * loads no cloud SDK at all.
 */
import type { ContainerModule } from 'inversify';
import { ConfigfsTsmDevice } from '../../adapters/attestation/snp/configfs-tsm.js';
import { QemuTdxIssuer } from '../../adapters/attestation/tdx/issuer.js';
import { createQemuVtpmIssuer } from '../../adapters/attestation/vtpm/issuer.js';
import { QemuMetadataAPI } from '../../adapters/cloud/qemu/metadata-api.js';
import { cloudBindingsModule } from './cloud-wiring.js';

/** npm packages of this cloud's SDK (none for QEMU). */
export const SDK_PACKAGES: readonly string[] = Object.freeze([]);

/** Loads this cloud's SDK now (nothing for QEMU); for the module-isolation check. */
export async function preloadSdk(): Promise<void> {}

/** The QEMU module: binds MetadataAPI and Issuer (cloud-wiring.ts). */
export function cloudModule(): ContainerModule {
  return cloudBindingsModule({
    metadata: (c, logger) =>
      new QemuMetadataAPI({
        ...(c.metadata.baseUrl === undefined ? {} : { baseUrl: c.metadata.baseUrl }),
        ...(c.metadata.localAddress === undefined ? {} : { localAddress: c.metadata.localAddress }),
        logger,
      }),
    issuer: (c, tpm) =>
      c.variant === 'qemu-tdx'
        ? new QemuTdxIssuer(new ConfigfsTsmDevice({ kind: 'tdx' }))
        : createQemuVtpmIssuer(tpm),
  });
}
