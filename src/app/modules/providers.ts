/**
 * The provider table (app layer, DI wiring): every cloud a confboot node can run on, ONE line each.
 * A line says which attestation variants the cloud's nodes issue (the first is the default) and how
 * to load the cloud's module — lazily, so a node loads no other cloud's module or SDK.
 *
 * Adding a metadata-only provider made from the template (test/contract/README.md) is one
 * `vtpmCloudModule` line here naming only the provider's own src/adapters/cloud/<cloud>/index.js.
 */
import { type CloudProvider, cloudModuleFile, vtpmCloudModule } from './provider.js';

/** csp → provider. The keys are the cloud names of `--csp` and of the node config. */
// biome-ignore format: the table reads one provider per line
export const CLOUD_MODULES = {
  gcp: cloudModuleFile(['gcp-sev-es', 'gcp-sev-snp'], () => import('./gcp.js')),
  azure: cloudModuleFile(['azure-trustedlaunch', 'azure-sev-snp', 'azure-tdx'], () => import('./azure.js')),
  aws: cloudModuleFile(['aws-nitro-tpm', 'aws-sev-snp'], () => import('./aws.js')),
  qemu: cloudModuleFile(['qemu-vtpm', 'qemu-tdx'], () => import('./qemu.js')),
  openstack: vtpmCloudModule(['qemu-vtpm'], () => import('../../adapters/cloud/openstack/index.js'), (m, s) => new m.OpenStackMetadataAPI({ metadataBaseUrl: s.metadataUrl, computeEndpoint: s.apiEndpoint(), authToken: s.authToken, logger: s.logger })),
} as const satisfies Record<string, CloudProvider>;
