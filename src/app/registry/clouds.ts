/**
 * The cloud registry (app layer, composition): ONE entry per cloud a confboot node can run on, each
 * of the same shape (cloud-entry.ts): the loader of its adapter in src/adapters/cloud/<cloud>/ (lazy,
 * so a node loads no other cloud's adapter or SDK), how its MetadataAPI is built from the node's
 * settings, its SDK packages, the variants it adopts from other clouds, whether it has its own
 * entrypoint and its TPM defaults. Which variants a cloud runs comes from the variant registry
 * (variants.ts: each variant names its clouds); src/app/registry/index.ts joins the two.
 */

import { AZURE_HCL_AK_HANDLE } from '../../adapters/attestation/azure/nv-reader.js';
import { GCE_AK_TEMPLATE_NV_INDEX_RSA } from '../../adapters/tpm/nv-template-ak.js';
import { type CloudEntry, type CloudTpmOptions, cloud, definedOnly } from './cloud-entry.js';

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

/** csp → cloud. The keys are the cloud names of `--csp` and of the node config, in `--help` order. */
export const CLOUDS: Record<string, CloudEntry> = {
  gcp: cloud(
    () => import('../../adapters/cloud/gcp/metadata-api.js'),
    (m, s) =>
      new m.GcpMetadataAPI({
        ...definedOnly({ metadataBaseUrl: s.metadataUrl }),
        ...m.computeEndpointOptions(s.apiEndpointIfSet),
        logger: s.logger,
      }),
    { sdkPackages: ['@google-cloud/compute'], entrypoint: true, tpm: GCE_TPM_OPTIONS },
  ),
  azure: cloud(
    () => import('../../adapters/cloud/azure/metadata-api.js'),
    (m, s) =>
      new m.AzureMetadataAPI({
        ...definedOnly({ imdsBaseUrl: s.metadataUrl, armEndpoint: s.apiEndpointIfSet }),
        logger: s.logger,
      }),
    { sdkPackages: ['@azure/arm-compute', '@azure/arm-network'], entrypoint: true, tpm: AZURE_TPM_OPTIONS },
  ),
  aws: cloud(
    () => import('../../adapters/cloud/aws/metadata-api.js'),
    (m, s) =>
      new m.AwsMetadataAPI({
        ...definedOnly({ imdsBaseUrl: s.metadataUrl, endpoint: s.apiEndpointIfSet }),
        logger: s.logger,
      }),
    {
      sdkPackages: [
        '@aws-sdk/client-ec2',
        '@aws-sdk/client-resource-groups-tagging-api',
        '@aws-sdk/client-elastic-load-balancing-v2',
      ],
      entrypoint: true,
    },
  ),
  qemu: cloud(
    () => import('../../adapters/cloud/qemu/metadata-api.js'),
    (m, s) =>
      new m.QemuMetadataAPI({
        ...definedOnly({ baseUrl: s.metadataUrl, localAddress: s.localAddress }),
        logger: s.logger,
      }),
    { entrypoint: true },
  ),
  openstack: cloud(
    () => import('../../adapters/cloud/openstack/index.js'),
    (m, s) =>
      new m.OpenStackMetadataAPI({
        metadataBaseUrl: s.metadataUrl,
        computeEndpoint: s.apiEndpoint(),
        authToken: s.authToken,
        logger: s.logger,
      }),
    // The join service reads Nova at an endpoint only the operator knows, with a Keystone token from
    // the default token file, which the operator mounts.
    {
      variants: ['qemu-vtpm'],
      joinServiceApiEndpoint:
        'the Nova compute endpoint (from the Keystone catalog, e.g. https://nova.example:8774/v2.1)',
    },
  ),
};
