/**
 * The cloud registry (app layer, composition): ONE line per cloud a confboot node can run on, with
 * the loader of its module file (lazy, so a node loads no other cloud's module or SDK), the variants
 * it adopts from other clouds, whether it has its own entrypoint and its TPM defaults. Which
 * variants a cloud runs comes from the variant registry (variants.ts: each variant names its
 * clouds); src/app/registry/index.ts joins the two.
 *
 * Nothing a loader loads imports this file (the module files read the node config and the variant
 * registry only), so the lazy loaders make no import cycle.
 */

import { AZURE_HCL_AK_HANDLE } from '../../adapters/attestation/azure/nv-reader.js';
import { GCE_AK_TEMPLATE_NV_INDEX_RSA } from '../../adapters/tpm/nv-template-ak.js';
import { type CloudEntry, type CloudTpmOptions, metadataOnlyCloud } from '../modules/provider.js';

/**
 * The node TPM's attestation key on GCE: the RSA AK GCE provisions, a primary key in the endorsement
 * hierarchy made from the template in NV index 0x01c10001 (persisted at the node's AK handle).
 */
export const GCE_TPM_OPTIONS: Readonly<CloudTpmOptions> = Object.freeze({
  akTemplateNvIndex: GCE_AK_TEMPLATE_NV_INDEX_RSA,
  akTemplateHierarchy: 'endorsement',
});

/** Azure's HCL provisions the AK at a fixed handle; confboot never creates one there. */
export const AZURE_TPM_OPTIONS: Readonly<CloudTpmOptions> = Object.freeze({
  akHandle: AZURE_HCL_AK_HANDLE,
  createAttestationKey: false,
});

/**
 * The join service on OpenStack reads Nova at an endpoint only the operator knows (from the
 * Keystone catalog) and a Keystone token from the default token file, which the operator mounts.
 */
const OPENSTACK_NOVA_PLACEHOLDER =
  '--cloud-api-endpoint=https://REPLACE-with-the-nova-compute-endpoint.invalid/v2.1';

/** csp → cloud. The keys are the cloud names of `--csp` and of the node config, in `--help` order. */
// biome-ignore format: the table reads one cloud per line
export const CLOUDS: Record<string, CloudEntry> = {
  gcp: { module: () => import('../modules/gcp.js'), entrypoint: true, tpm: GCE_TPM_OPTIONS },
  azure: { module: () => import('../modules/azure.js'), entrypoint: true, tpm: AZURE_TPM_OPTIONS },
  aws: { module: () => import('../modules/aws.js'), entrypoint: true },
  qemu: { module: () => import('../modules/qemu.js'), entrypoint: true },
  openstack: { ...metadataOnlyCloud(() => import('../../adapters/cloud/openstack/index.js'), (m, s) => new m.OpenStackMetadataAPI({ metadataBaseUrl: s.metadataUrl, computeEndpoint: s.apiEndpoint(), authToken: s.authToken, logger: s.logger })), joinServiceFlags: [OPENSTACK_NOVA_PLACEHOLDER] },
};
