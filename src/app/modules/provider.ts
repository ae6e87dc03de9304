/**
 * The builder of a metadata-only cloud registry entry (app layer, DI wiring): a provider made from
 * the provider template (test/contract/README.md) supplies only its MetadataAPI; its nodes attest
 * with a variant of another cloud (qemu-vtpm on their TPM, by default). Its registry line names only
 * the provider's own folder, src/adapters/cloud/<cloud>/.
 */
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { CloudEntry, ProviderSettings } from './provider-settings.js';

export {
  type CloudEntry,
  type CloudMetadataSettings,
  type CloudModuleFile,
  type CloudTpmOptions,
  DEFAULT_CLOUD_API_TOKEN_PATH,
  type ProviderSettings,
  providerSettings,
} from './provider-settings.js';

/**
 * A metadata-only provider. `load` imports the provider's adapter (its index.js); `create` builds its
 * MetadataAPI from the node's settings. The MetadataAPI is created on first use, so
 * `--check-wiring` resolves without cloud settings, and a missing setting is reported by the first
 * metadata call, naming it. `variants` are the variants its nodes run (default qemu-vtpm).
 */
export function metadataOnlyCloud<M>(
  load: () => Promise<M>,
  create: (adapter: M, settings: ProviderSettings) => MetadataAPI,
  variants: readonly string[] = ['qemu-vtpm'],
): CloudEntry {
  return {
    variants: Object.freeze([...variants]),
    module: async () => (await import('./vtpm-cloud.js')).vtpmModuleFile(load, create),
  };
}
