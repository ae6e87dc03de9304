/**
 * The binding every cloud module file (aws.ts, azure.ts, gcp.ts, qemu.ts) makes (app layer, DI
 * wiring): MetadataAPI built from the node config and logger, Issuer built from the node config and
 * the node's TPM, both singletons. Each cloud file supplies only its two factories, so the files
 * read like a table; the vTPM clouds build their issuer with {@link cloudVtpmIssuer}.
 */
import { ContainerModule } from 'inversify';
import {
  type InstanceInfoProvider,
  LINUX_EVENT_LOG_PATH,
  VtpmIssuer,
  type VtpmVariant,
} from '../../adapters/attestation/vtpm/issuer.js';
import { Issuer } from '../../ports/issuer.js';
import { Logger } from '../../ports/logger.js';
import { MetadataAPI } from '../../ports/metadata-api.js';
import { Tpm } from '../../ports/tpm.js';
import type { CallOptions } from '../../ports/types.js';
import { NodeConfig } from './node-config.js';

/** What a cloud module binds, as factories of their dependencies. */
export interface CloudBindings {
  /** Builds the cloud's MetadataAPI. */
  metadata(config: NodeConfig, logger: Logger): MetadataAPI;
  /** Builds the node's Issuer. */
  issuer(config: NodeConfig, tpm: Tpm): Issuer;
}

/** A ContainerModule binding {@link MetadataAPI} and {@link Issuer} (singletons) from `bindings`. */
export function cloudBindingsModule(bindings: CloudBindings): ContainerModule {
  return new ContainerModule(({ bind }) => {
    bind<MetadataAPI>(MetadataAPI)
      .toResolvedValue((c: NodeConfig, logger: Logger) => bindings.metadata(c, logger), [NodeConfig, Logger])
      .inSingletonScope();
    bind<Issuer>(Issuer)
      .toResolvedValue((c: NodeConfig, tpm: Tpm) => bindings.issuer(c, tpm), [NodeConfig, Tpm])
      .inSingletonScope();
  });
}

/**
 * The Issuer factory of a cloud whose nodes attest with a vTPM quote, the kernel's event log and the
 * cloud's instance info (read per issue by `instanceInfo`).
 */
export function cloudVtpmIssuer(
  variant: VtpmVariant,
  instanceInfo: (config: NodeConfig, options?: CallOptions) => Promise<Uint8Array>,
): CloudBindings['issuer'] {
  return (c, tpm) => {
    const info: InstanceInfoProvider = (_extraData, options) => instanceInfo(c, options);
    return new VtpmIssuer({ variant, tpm, instanceInfo: info, eventLogPath: LINUX_EVENT_LOG_PATH });
  };
}
