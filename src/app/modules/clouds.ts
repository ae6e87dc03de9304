/**
 * The clouds a confboot node can run on, as plain data (app layer): each cloud's name and the
 * attestation variants its nodes issue, the first being the cloud's default. It imports nothing but
 * the variant type, so the node config and the CLI can read it without loading any module file; the
 * loaders live in providers.ts, which must have exactly these keys (a type check makes sure).
 */
import type { Variant } from '../../ports/variant.js';

/** csp → the variants a node of that cloud issues (first = default). Keys are `--csp` names. */
// biome-ignore format: the table reads one cloud per line
export const CLOUD_ISSUERS = {
  gcp: ['gcp-sev-es', 'gcp-sev-snp'],
  azure: ['azure-trustedlaunch', 'azure-sev-snp', 'azure-tdx'],
  aws: ['aws-nitro-tpm', 'aws-sev-snp'],
  qemu: ['qemu-vtpm', 'qemu-tdx'],
  openstack: ['qemu-vtpm'],
} as const satisfies Record<string, readonly Variant[]>;
