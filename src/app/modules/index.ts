/**
 * Builds the DI container of a bootstrapper node (app layer, DI wiring): the common module plus the
 * cloud module of the config's cloud, which binds the MetadataAPI of that cloud's registry entry
 * (src/app/registry/clouds.ts) and the Issuer of the node's variant. The entry imports its adapter
 * only when the MetadataAPI is first called, so a node for one cloud never loads another cloud's
 * adapter — nor, through it, another cloud's SDK.
 */
import { Container } from 'inversify';
import type { Variant } from '../../ports/variant.js';
import type { BootstrapperNodeDeps } from '../bootstrapper/node.js';
import { cloudNames, cloudVariants, nodeConfig } from '../registry/index.js';
import type { Csp, NodeConfig, NodeConfigInput } from '../registry/node-config.js';
import { BootstrapperDeps, cloudModule, commonModule, NODE_TOKENS } from './common.js';

export {
  type CloudEntry,
  type CloudMetadataSettings,
  type CloudTpmOptions,
  cloud,
  cloudNames,
  cloudVariants,
  cspFromString,
  DEFAULT_CLOUD_API_TOKEN_PATH,
  nodeConfig,
  type ProviderSettings,
  providerSettings,
  registerCloud,
  registerVariant,
  variantNames,
} from '../registry/index.js';
export * from '../registry/node-config.js';
export {
  BootstrapperDeps,
  cloudModule,
  commonModule,
  LogRing,
  NODE_TOKENS,
  SharedNodeLock,
} from './common.js';

/** The built-in clouds, in registry order (clouds registered later: {@link cloudNames}). */
export const CSPS: readonly Csp[] = Object.freeze(cloudNames());

/** The variants each built-in cloud's nodes run, the default first (later ones: {@link cloudVariants}). */
export const ISSUER_VARIANTS_BY_CSP: Readonly<Record<Csp, readonly Variant[]>> = Object.freeze(
  Object.fromEntries(CSPS.map((csp) => [csp, Object.freeze(cloudVariants(csp))])),
);

/** Every variant of each built-in cloud (the same as {@link ISSUER_VARIANTS_BY_CSP}; a name library users know). */
export const VARIANTS_BY_CSP = ISSUER_VARIANTS_BY_CSP;

/**
 * Builds the container of a bootstrapper node: the common module plus the module of the config's
 * cloud. Accepts a checked {@link NodeConfig} or raw input (checked here: `dummy` is refused).
 */
export async function createNodeContainer(config: NodeConfig | NodeConfigInput): Promise<Container> {
  const checked = nodeConfig(config as NodeConfigInput);
  const container = new Container();
  container.load(commonModule(checked), cloudModule());
  return container;
}

/** Resolves every binding of a node container without touching hardware; returns the token names. */
export async function checkWiring(container: Container): Promise<string[]> {
  const names: string[] = [];
  for (const token of NODE_TOKENS) {
    await container.getAsync(token);
    names.push(token.description ?? String(token));
  }
  return names;
}

/** The bootstrapper's dependencies from a node container. */
export function bootstrapperDeps(container: Container): Promise<BootstrapperNodeDeps> {
  return container.getAsync<BootstrapperNodeDeps>(BootstrapperDeps);
}
