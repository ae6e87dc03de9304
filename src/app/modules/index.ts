/**
 * Picks and loads the node module of one cloud (app layer, DI wiring). The switch below is the only
 * place that names the cloud module files, and it imports only the chosen one, so a node for one
 * cloud never loads another cloud's module — nor, through it, another cloud's SDK.
 */
import { Container, type ContainerModule } from 'inversify';
import type { BootstrapperNodeDeps } from '../bootstrapper/node.js';
import { BootstrapperDeps, commonModule, NODE_TOKENS } from './common.js';
import { type Csp, type NodeConfig, type NodeConfigInput, nodeConfig } from './node-config.js';

export { BootstrapperDeps, commonModule, LogRing, NODE_TOKENS, SharedNodeLock } from './common.js';
export * from './node-config.js';

/** What every cloud module file exports. */
export interface CloudModuleFile {
  /** Binds MetadataAPI and Issuer for this cloud. */
  cloudModule(): ContainerModule;
  /** npm packages of the cloud's SDK. */
  SDK_PACKAGES: readonly string[];
  /** Loads the cloud's SDK now (for the isolation check). */
  preloadSdk(): Promise<void>;
}

/** Imports the module file of `csp` — and no other. */
export async function moduleForCsp(csp: Csp): Promise<CloudModuleFile> {
  switch (csp) {
    case 'gcp':
      return import('./gcp.js');
    case 'azure':
      return import('./azure.js');
    case 'aws':
      return import('./aws.js');
    case 'qemu':
      return import('./qemu.js');
  }
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
