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
import { readFile } from 'node:fs/promises';
import type { ContainerModule } from 'inversify';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { Variant } from '../../ports/variant.js';
import type { NodeConfig } from './node-config.js';

/** What every cloud module file exports. */
export interface CloudModuleFile {
  /** Binds MetadataAPI and Issuer for this cloud. */
  cloudModule(): ContainerModule;
  /** npm packages of the cloud's SDK. */
  SDK_PACKAGES: readonly string[];
  /** Loads the cloud's SDK now (for the isolation check); for SDK-less providers, their adapter. */
  preloadSdk(): Promise<void>;
}

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
export function providerSettings(config: NodeConfig, logger: Logger): ProviderSettings {
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
