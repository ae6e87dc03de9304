/**
 * Picks and loads the node module of one cloud (app layer, DI wiring). The provider table
 * (providers.ts, one line per cloud) is the only place that names the cloud module files, and
 * {@link moduleForCsp} imports only the chosen one, so a node for one cloud never loads another
 * cloud's module — nor, through it, another cloud's SDK.
 */
import { Container } from 'inversify';
import type { BootstrapperNodeDeps } from '../bootstrapper/node.js';
import { BootstrapperDeps, commonModule, NODE_TOKENS } from './common.js';
import { type Csp, type NodeConfig, type NodeConfigInput, nodeConfig } from './node-config.js';
import type { CloudModuleFile } from './provider.js';
import { CLOUD_MODULES } from './providers.js';

export { BootstrapperDeps, commonModule, LogRing, NODE_TOKENS, SharedNodeLock } from './common.js';
export * from './node-config.js';
export {
  type CloudModuleFile,
  type CloudProvider,
  cloudModuleFile,
  DEFAULT_CLOUD_API_TOKEN_PATH,
  type ProviderSettings,
  providerSettings,
  vtpmCloudModule,
} from './provider.js';
export { CLOUD_MODULES } from './providers.js';

/** Imports the module file of `csp` — and no other. */
export async function moduleForCsp(csp: Csp): Promise<CloudModuleFile> {
  const provider = CLOUD_MODULES[csp];
  if (provider === undefined) throw new Error(`no module for cloud ${JSON.stringify(csp)}`);
  return provider.load();
}

/**
 * Builds the container of a bootstrapper node: the common module plus the module of the config's
 * cloud. Accepts a checked {@link NodeConfig} or raw input (checked here: `dummy` is refused).
 */
export async function createNodeContainer(config: NodeConfig | NodeConfigInput): Promise<Container> {
  const checked = nodeConfig(config as NodeConfigInput);
  const cloud = await moduleForCsp(checked.csp);
  const container = new Container();
  container.load(commonModule(checked), cloud.cloudModule());
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
