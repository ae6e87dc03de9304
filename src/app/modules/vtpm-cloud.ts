/**
 * The module file of a metadata-only provider (app layer, DI wiring), built by
 * `metadataOnlyCloud` (provider.ts) from a cloud registry entry: MetadataAPI from the provider's
 * adapter, created on first use, and the Issuer of the node's variant (cloud-wiring.ts; qemu-vtpm
 * for providers made from the template). Loads no cloud SDK itself; the adapter it wraps is
 * imported on first use (or by `preloadSdk`).
 */
import { wrapError } from '../../ports/errors.js';
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { CallOptions, Endpoint, InstanceMetadata } from '../../ports/types.js';
import { cloudBindingsModule, type MetadataFactory } from './cloud-wiring.js';
import { type CloudModuleFile, type ProviderSettings, providerSettings } from './provider-settings.js';

/**
 * A MetadataAPI that imports and builds the real one on its first call. A failed build (a missing
 * setting, say) is not cached: the next call tries again.
 */
export class LazyMetadataAPI implements MetadataAPI {
  private real: Promise<MetadataAPI> | undefined;

  constructor(
    private readonly csp: string,
    private readonly build: () => Promise<MetadataAPI>,
  ) {}

  private get(): Promise<MetadataAPI> {
    this.real ??= this.build().catch((err: unknown) => {
      this.real = undefined;
      throw wrapError(`setting up the ${this.csp} metadata API`, err, 'failed-precondition');
    });
    return this.real;
  }

  /** {@inheritDoc MetadataAPI.self} */
  async self(options?: CallOptions): Promise<InstanceMetadata> {
    return (await this.get()).self(options);
  }
  /** {@inheritDoc MetadataAPI.list} */
  async list(options?: CallOptions): Promise<InstanceMetadata[]> {
    return (await this.get()).list(options);
  }
  /** {@inheritDoc MetadataAPI.getLoadBalancerEndpoint} */
  async getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint> {
    return (await this.get()).getLoadBalancerEndpoint(options);
  }
  /** {@inheritDoc MetadataAPI.initSecretHash} */
  async initSecretHash(options?: CallOptions): Promise<Uint8Array> {
    return (await this.get()).initSecretHash(options);
  }
  /** {@inheritDoc MetadataAPI.uid} */
  async uid(options?: CallOptions): Promise<string> {
    return (await this.get()).uid(options);
  }
}

/** The module file of one metadata-only provider (see `metadataOnlyCloud` (provider.ts)). */
export function vtpmModuleFile<M>(
  load: () => Promise<M>,
  create: (adapter: M, settings: ProviderSettings) => MetadataAPI,
): CloudModuleFile {
  const metadataApi: MetadataFactory = (c, logger) =>
    new LazyMetadataAPI(c.csp, async () => create(await load(), providerSettings(c, logger)));
  return {
    SDK_PACKAGES: Object.freeze([]),
    preloadSdk: async () => {
      await load();
    },
    metadataApi,
    cloudModule: () => cloudBindingsModule(metadataApi),
  };
}
