/**
 * The bindings every cloud module file (aws.ts, azure.ts, gcp.ts, qemu.ts, vtpm-cloud.ts) makes
 * (app layer, DI wiring): MetadataAPI from the cloud's factory, and the Issuer of the node's variant
 * from the variant registry (src/app/registry/variants.ts), both singletons. A cloud file supplies
 * only its MetadataAPI factory; which issuer a node gets is the variant's business, not the cloud's.
 */
import { ContainerModule } from 'inversify';
import { ConfbootError } from '../../ports/errors.js';
import { Issuer } from '../../ports/issuer.js';
import { Logger } from '../../ports/logger.js';
import { MetadataAPI } from '../../ports/metadata-api.js';
import { Tpm } from '../../ports/tpm.js';
import { VARIANTS } from '../registry/variants.js';
import { NodeConfig } from './node-config.js';
import type { CloudMetadataSettings } from './provider-settings.js';

/** Builds a cloud's MetadataAPI from the node's metadata settings. */
export type MetadataFactory = (settings: CloudMetadataSettings, logger: Logger) => MetadataAPI;

/** The Issuer of the node's variant, built by the variant's registry entry. */
export function variantIssuer(config: NodeConfig, tpm: Tpm): Promise<Issuer> {
  const entry = Object.hasOwn(VARIANTS, config.variant) ? VARIANTS[config.variant] : undefined;
  if (entry === undefined)
    throw new ConfbootError('invalid-argument', `no issuer for attestation variant ${config.variant}`);
  return entry.issuer({ config, tpm });
}

/** A ContainerModule binding {@link MetadataAPI} (from `metadata`) and {@link Issuer}, singletons. */
export function cloudBindingsModule(metadata: MetadataFactory): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<MetadataAPI>(MetadataAPI)
      .toResolvedValue((c: NodeConfig, logger: Logger) => metadata(c, logger), [NodeConfig, Logger])
      .inSingletonScope();
    bind<Issuer>(Issuer).toResolvedValue(variantIssuer, [NodeConfig, Tpm]).inSingletonScope();
  });
}
