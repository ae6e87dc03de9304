/**
 * What one entry of the provider table (providers.ts) is, and the two builders that make one (app
 * layer, DI wiring). An entry says which attestation variants a node of that cloud can issue and how
 * to load the cloud's module file — lazily, so a node never loads another cloud's module or SDK.
 *
 * - {@link cloudModuleFile}: a cloud with its own module file (gcp.ts, azure.ts, aws.ts, qemu.ts).
 * - {@link vtpmCloudModule}: a metadata-only provider (like OpenStack) made from the provider
 *   template: it supplies only its MetadataAPI; the node attests with the generic qemu-vtpm issuer
 *   on its TPM. Its entry is one line that names only the provider's own folder.
 */
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { Variant } from '../../ports/variant.js';
import type { CloudModuleFile, ProviderSettings } from './provider-settings.js';

export {
  type CloudModuleFile,
  DEFAULT_CLOUD_API_TOKEN_PATH,
  type ProviderSettings,
  providerSettings,
} from './provider-settings.js';

/** One entry of the provider table. */
export interface CloudProvider {
  /** Variants a node of this cloud can issue (the first is the default). */
  readonly issuers: readonly Variant[];
  /** Imports the cloud's module file — and nothing of any other cloud. */
  load(): Promise<CloudModuleFile>;
}

/** A provider with its own module file. */
export function cloudModuleFile(
  issuers: readonly Variant[],
  load: () => Promise<CloudModuleFile>,
): CloudProvider {
  return { issuers: Object.freeze([...issuers]), load };
}

/**
 * A metadata-only provider whose nodes attest with qemu-vtpm on their TPM. `load` imports the
 * provider's adapter (its index.js); `create` builds its MetadataAPI from the node's settings. The
 * MetadataAPI is created on first use, so `--check-wiring` resolves without cloud settings, and a
 * missing setting is reported by the first metadata call, naming it.
 */
export function vtpmCloudModule<M>(
  issuers: readonly 'qemu-vtpm'[],
  load: () => Promise<M>,
  create: (adapter: M, settings: ProviderSettings) => MetadataAPI,
): CloudProvider {
  return {
    issuers: Object.freeze([...issuers]),
    load: async () => (await import('./vtpm-cloud.js')).vtpmModuleFile(load, create),
  };
}
