/**
 * What the variant registry's issuers read on a node (app layer, composition): the GCE instance,
 * Azure's NV memory, the configfs-tsm device, and the aws-nitro-tpm issuer. Each imports its
 * adapters on first use, so a node loads only its own variant's.
 */
import { LINUX_EVENT_LOG_PATH } from '../../adapters/attestation/vtpm/issuer.js';
import type { Issuer } from '../../ports/issuer.js';
import type { Tpm } from '../../ports/tpm.js';
import type { CallOptions } from '../../ports/types.js';
import type { NodeConfig } from './node-config.js';

/** What a node's Issuer is built from: the node config and the node's TPM. */
export interface IssuerContext {
  config: NodeConfig;
  tpm: Tpm;
}

/** The GCE metadata server root of a node (its `--metadata-url`, or GCE's own). */
export async function gceInstance(node: IssuerContext) {
  const { DEFAULT_GCE_METADATA_URL, gceInstanceInfo } = await import('../../adapters/cloud/gcp/index.js');
  const base = node.config.metadata.baseUrl ?? DEFAULT_GCE_METADATA_URL;
  return (options?: CallOptions) => gceInstanceInfo(base, options);
}

/** A reader of the node TPM's NV memory (Azure's HCL keeps its reports and the AK certificate there). */
export async function azureNv(node: IssuerContext) {
  const { tpm2NvReader } = await import('../../adapters/attestation/azure/nv-reader.js');
  return tpm2NvReader({ tcti: node.config.tcti });
}

/** The aws-nitro-tpm issuer: IMDS identity, AWS's NitroTPM document, SHA-256 and SHA-384 quotes. */
export async function awsNitroTpmIssuer(node: IssuerContext, oid: string): Promise<Issuer> {
  const { awsInstanceIdentity, DEFAULT_AWS_IMDS_URL } = await import('../../adapters/cloud/aws/index.js');
  const { createAwsNitroTpmIssuer } = await import('../../adapters/attestation/variants/aws-nitro-tpm.js');
  const { NitroTpmNsmAttestor } = await import('../../adapters/tpm/nitrotpm-nsm.js');
  const tpm = node.tpm as Tpm & { quoteBank?: unknown };
  if (typeof tpm.quoteBank !== 'function')
    throw new Error('aws-nitro-tpm needs a TPM adapter that quotes the SHA-384 bank (quoteBank)');
  const base = node.config.metadata.baseUrl ?? DEFAULT_AWS_IMDS_URL;
  return createAwsNitroTpmIssuer({
    tpm: tpm as Parameters<typeof createAwsNitroTpmIssuer>[0]['tpm'],
    instanceIdentity: (options) => awsInstanceIdentity(base, options),
    nitroTpm: new NitroTpmNsmAttestor({ tcti: node.config.tcti }),
    oid,
    eventLogPath: LINUX_EVENT_LOG_PATH,
  });
}

/** An SEV-SNP guest device through configfs-tsm. */
export async function tsm(kind: 'sev-snp' | 'tdx') {
  const { ConfigfsTsmDevice } = await import('../../adapters/attestation/snp/configfs-tsm.js');
  return new ConfigfsTsmDevice({ kind });
}
