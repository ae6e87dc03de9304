/**
 * The provider table (app layer, DI wiring): every cloud a confboot node can run on, ONE line each.
 * A line says which attestation variants the cloud's nodes issue (the first is the default) and how
 * to load the cloud's module — lazily, so a node loads no other cloud's module or SDK.
 *
 * The variants come from the plain-data table in clouds.ts; this file adds the loaders.
 * Adding a metadata-only provider made from the template (test/contract/README.md) is one line in
 * clouds.ts plus one `vtpmCloudModule` line here naming only the provider's own
 * src/adapters/cloud/<cloud>/index.js.
 */
import { CLOUD_ISSUERS } from './clouds.js';
import { type CloudProvider, cloudModuleFile, vtpmCloudModule } from './provider.js';

/** csp → provider. The keys are the cloud names of `--csp` and of the node config. */
// biome-ignore format: the table reads one provider per line
export const CLOUD_MODULES = {
  gcp: cloudModuleFile(CLOUD_ISSUERS.gcp, () => import('./gcp.js')),
  azure: cloudModuleFile(CLOUD_ISSUERS.azure, () => import('./azure.js')),
  aws: cloudModuleFile(CLOUD_ISSUERS.aws, () => import('./aws.js')),
  qemu: cloudModuleFile(CLOUD_ISSUERS.qemu, () => import('./qemu.js')),
  openstack: vtpmCloudModule(CLOUD_ISSUERS.openstack, () => import('../../adapters/cloud/openstack/index.js'), (m, s) => new m.OpenStackMetadataAPI({ metadataBaseUrl: s.metadataUrl, computeEndpoint: s.apiEndpoint(), authToken: s.authToken, logger: s.logger })),
} as const satisfies Record<keyof typeof CLOUD_ISSUERS, CloudProvider>;
