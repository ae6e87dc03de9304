/**
 * What one entry of the cloud registry (src/app/registry/clouds.ts) is, what a cloud module file
 * exports, and the settings a metadata-only provider (metadataOnlyCloud in provider.ts) builds its
 * MetadataAPI from, read from the node config (app layer). A leaf file, so the registry, the module
 * files and the lazily loaded vtpm-cloud.ts can all use these types without an import cycle.
 */
import { readFile } from 'node:fs/promises';
import type { ContainerModule } from 'inversify';
import type { Tpm2ToolsTpmOptions } from '../../adapters/tpm/tpm2-tools-tpm.js';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { NodeConfig } from './node-config.js';

/** What a cloud sets on its nodes' TPM: how the attestation key is provisioned there. */
export type CloudTpmOptions = Pick<
  Tpm2ToolsTpmOptions,
  'akHandle' | 'createAttestationKey' | 'akTemplateNvIndex' | 'akTemplateHierarchy'
>;

/** One entry of the cloud registry: plain data plus the lazy loader of the cloud's module file. */
export interface CloudEntry {
  /** Imports the cloud's module file — and nothing of any other cloud. */
  module(): Promise<CloudModuleFile>;
  /**
   * Variants this cloud's nodes run although their registry entries name other clouds (OpenStack
   * adopts qemu-vtpm). A cloud's own variants name it themselves (src/app/registry/variants.ts).
   */
  variants?: readonly string[];
  /** Whether it has its own entrypoint, src/app/entrypoints/<cloud>.ts (else `confboot bootstrapper --csp`). */
  entrypoint?: boolean;
  /** Defaults of its nodes' TPM (the node config's `akHandle` still wins). */
  tpm?: Readonly<CloudTpmOptions>;
  /** Flags its join service needs besides the common ones (rendered into the manifests). */
  joinServiceFlags?: readonly string[];
}

/** What a cloud's MetadataAPI is built from: the node config's cloud name and metadata endpoints. */
export type CloudMetadataSettings = Pick<NodeConfig, 'csp' | 'metadata'>;

/** What every cloud module file exports. */
export interface CloudModuleFile {
  /** Binds MetadataAPI and Issuer for this cloud. */
  cloudModule(): ContainerModule;
  /** Builds the cloud's MetadataAPI (the join service uses it without a node container). */
  metadataApi(settings: CloudMetadataSettings, logger: Logger): MetadataAPI;
  /** npm packages of the cloud's SDK. */
  SDK_PACKAGES: readonly string[];
  /** Loads the cloud's SDK now (for the isolation check); for SDK-less providers, their adapter. */
  preloadSdk(): Promise<void>;
}

/** Where a metadata-only provider's API token is read from unless the node config says otherwise. */
export const DEFAULT_CLOUD_API_TOKEN_PATH = '/run/confboot/cloud-api-token';

/**
 * The node's settings as a metadata-only provider gets them (from {@link NodeConfig}`.metadata`).
 * Nothing is read or checked until the provider is first used.
 */
export interface ProviderSettings {
  /** The cloud's name, for messages. */
  csp: string;
  /** Metadata service root (`--metadata-url`); undefined: the provider's default. */
  metadataUrl: string | undefined;
  /**
   * The cloud API endpoint (`--cloud-api-endpoint`, e.g. OpenStack's Nova endpoint).
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
  return {
    csp: config.csp,
    metadataUrl: m.baseUrl,
    apiEndpoint: () => {
      if (m.apiEndpoint === undefined || m.apiEndpoint === '')
        throw new ConfbootError(
          'failed-precondition',
          `${config.csp} metadata: no cloud API endpoint configured (node config metadata.apiEndpoint, flag --cloud-api-endpoint)`,
        );
      return m.apiEndpoint;
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
