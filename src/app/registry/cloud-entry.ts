/**
 * What one entry of the cloud registry (clouds.ts) is, and {@link cloud}, which builds one (app
 * layer, composition). Every cloud has the same shape: its adapter folder, src/adapters/cloud/<cloud>/,
 * loaded lazily, and the function that builds its MetadataAPI from the node's settings. Nothing of a
 * cloud is imported until its MetadataAPI is first called (or `--preload-sdk` asks for it), so a node
 * for one cloud never loads another cloud's adapter or SDK. Which variants a cloud's nodes run, and so
 * their Issuer, comes from the variant registry (variants.ts), not from the cloud.
 */
import { readFile } from 'node:fs/promises';
import type { Tpm2ToolsTpmOptions } from '../../adapters/tpm/tpm2-tools-tpm.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { CallOptions, Endpoint, InstanceMetadata } from '../../ports/types.js';
import type { NodeConfig } from './node-config.js';

/** What a cloud sets on its nodes' TPM: how the attestation key is provisioned there. */
export type CloudTpmOptions = Pick<
  Tpm2ToolsTpmOptions,
  'akHandle' | 'createAttestationKey' | 'akTemplateNvIndex' | 'akTemplateHierarchy'
>;

/** What a cloud's MetadataAPI is built from: the node config's cloud name and metadata endpoints. */
export type CloudMetadataSettings = Pick<NodeConfig, 'csp' | 'metadata'>;

/** What an entry says besides its adapter: all optional. */
export interface CloudOptions {
  /** npm packages of the cloud's SDK, which its adapter imports lazily; default none. */
  sdkPackages?: readonly string[];
  /**
   * Variants this cloud's nodes run although their registry entries name other clouds (OpenStack
   * adopts qemu-vtpm). A cloud's own variants name it themselves (variants.ts).
   */
  variants?: readonly string[];
  /** Whether it has its own entrypoint, src/app/entrypoints/<cloud>.ts (else `confboot bootstrapper --csp`). */
  entrypoint?: boolean;
  /** Defaults of its nodes' TPM (the node config's `akHandle` still wins). */
  tpm?: Readonly<CloudTpmOptions>;
  /**
   * The cloud API endpoint its join service needs, which has no default and only the operator knows
   * (OpenStack: the Nova compute endpoint from the Keystone catalog), named as messages name it. The
   * manifests read it from ConfigMap join-config (key `cloudApiEndpoint`) and the join service
   * refuses to start without it.
   */
  joinServiceApiEndpoint?: string;
}

/** One entry of the cloud registry. */
export interface CloudEntry extends Omit<CloudOptions, 'sdkPackages'> {
  /**
   * The cloud's MetadataAPI for a node or join service. Its adapter is imported and built on the
   * first call, so `--check-wiring` resolves it without cloud settings, and a missing or bad setting
   * is reported by the first metadata call, naming it.
   */
  metadataApi(settings: CloudMetadataSettings, logger: Logger): MetadataAPI;
  /** npm packages of the cloud's SDK. */
  sdkPackages: readonly string[];
  /** Imports the cloud's adapter and SDK now (the module-isolation check, `--preload-sdk`). */
  preload(): Promise<void>;
}

/** Where a cloud's API token is read from unless the node config says otherwise. */
export const DEFAULT_CLOUD_API_TOKEN_PATH = '/run/confboot/cloud-api-token';

/**
 * The node's settings as a cloud's MetadataAPI is built from them (from {@link NodeConfig}`.metadata`).
 * Nothing is read or checked until the MetadataAPI is first used.
 */
export interface ProviderSettings {
  /** The cloud's name, for messages. */
  csp: string;
  /** Metadata service root (`--metadata-url`); undefined: the provider's default. */
  metadataUrl: string | undefined;
  /** The cloud API endpoint (`--cloud-api-endpoint`) if one is configured; undefined: the SDK's. */
  apiEndpointIfSet: string | undefined;
  /**
   * The cloud API endpoint (`--cloud-api-endpoint`, e.g. OpenStack's Nova endpoint), for a cloud that
   * has no default.
   * @throws ConfbootError `failed-precondition` naming the setting when none is configured
   */
  apiEndpoint(): string;
  /**
   * The cloud API token, read from `metadata.authTokenFile` (default
   * {@link DEFAULT_CLOUD_API_TOKEN_PATH}) on every call so a rotated token is picked up.
   * @throws ConfbootError `unavailable` when the file cannot be read or is empty
   */
  authToken(): Promise<string>;
  /** Source address of metadata requests, if configured. */
  localAddress: string | undefined;
  logger: Logger;
}

/** Builds the {@link ProviderSettings} of `config`. */
export function providerSettings(config: CloudMetadataSettings, logger: Logger): ProviderSettings {
  const m = config.metadata;
  // Trimmed: a value from a ConfigMap file (an environment variable) may end in a newline.
  const trimmed = m.apiEndpoint?.trim();
  const configured = trimmed === '' ? undefined : trimmed;
  return {
    csp: config.csp,
    metadataUrl: m.baseUrl,
    apiEndpointIfSet: configured,
    apiEndpoint: () => {
      if (configured === undefined)
        throw new ConfbootError(
          'failed-precondition',
          `${config.csp} metadata: no cloud API endpoint configured (node config metadata.apiEndpoint, flag --cloud-api-endpoint)`,
        );
      return configured;
    },
    authToken: async () => {
      const path = m.authTokenFile ?? DEFAULT_CLOUD_API_TOKEN_PATH;
      let token: string;
      try {
        token = (await readFile(path, 'utf8')).trim();
      } catch (err) {
        throw wrapError(
          `${config.csp} metadata: reading the cloud API token from ${path}`,
          err,
          'unavailable',
        );
      }
      if (token === '')
        throw new ConfbootError(
          'unavailable',
          `${config.csp} metadata: cloud API token file ${path} is empty`,
        );
      return token;
    },
    localAddress: m.localAddress,
    logger,
  };
}

/** `options` without its undefined values, for adapter options that are optional but not undefined. */
export function definedOnly<T extends object>(options: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: Exclude<T[K], undefined>;
  };
}

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

  /** The real MetadataAPI, imported and built on the first call. */
  adapter(): Promise<MetadataAPI> {
    this.real ??= this.build().catch((err: unknown) => {
      this.real = undefined;
      throw wrapError(`setting up the ${this.csp} metadata API`, err, 'failed-precondition');
    });
    return this.real;
  }

  /** {@inheritDoc MetadataAPI.self} */
  async self(options?: CallOptions): Promise<InstanceMetadata> {
    return (await this.adapter()).self(options);
  }
  /** {@inheritDoc MetadataAPI.list} */
  async list(options?: CallOptions): Promise<InstanceMetadata[]> {
    return (await this.adapter()).list(options);
  }
  /** {@inheritDoc MetadataAPI.getLoadBalancerEndpoint} */
  async getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint> {
    return (await this.adapter()).getLoadBalancerEndpoint(options);
  }
  /** {@inheritDoc MetadataAPI.initSecretHash} */
  async initSecretHash(options?: CallOptions): Promise<Uint8Array> {
    return (await this.adapter()).initSecretHash(options);
  }
  /** {@inheritDoc MetadataAPI.uid} */
  async uid(options?: CallOptions): Promise<string> {
    return (await this.adapter()).uid(options);
  }
}

/**
 * A cloud registry entry. `load` imports the cloud's adapter (a file of
 * src/adapters/cloud/<cloud>/); `create` builds its MetadataAPI from the node's settings.
 */
export function cloud<M>(
  load: () => Promise<M>,
  create: (adapter: M, settings: ProviderSettings) => MetadataAPI,
  options: CloudOptions = {},
): CloudEntry {
  const { sdkPackages = [], variants, ...rest } = options;
  return {
    ...rest,
    ...(variants === undefined ? {} : { variants: Object.freeze([...variants]) }),
    sdkPackages: Object.freeze([...sdkPackages]),
    metadataApi: (settings, logger) =>
      new LazyMetadataAPI(settings.csp, async () => create(await load(), providerSettings(settings, logger))),
    preload: async () => {
      await load();
      for (const sdk of sdkPackages) await import(sdk);
    },
  };
}
