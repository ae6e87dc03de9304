/**
 * The configuration of one bootstrapper node (app layer, DI wiring): which cloud, which attestation
 * variant, where the TPM, the state disk and the files are. Bound as a constant under the
 * {@link NodeConfig} token; every module reads it. `nodeConfig` (src/app/registry/index.ts) checks
 * the cloud and variant against the registries before {@link withNodeDefaults} fills in the rest:
 * it refuses the test-only `dummy` variant and any variant the cloud does not run, so production
 * wiring can never attest with a fake.
 */
import { DEFAULT_NODE_STATE_PATH } from '../../adapters/state/json-node-state-store.js';
import { DEVICE_TCTI } from '../../adapters/tpm/tpm2-tools-tpm.js';
import { DEFAULT_JOIN_PATHS } from '../../domain/join-ticket-apply.js';
import { ConfbootError } from '../../ports/errors.js';
import type { Variant } from '../../ports/variant.js';

/** A cloud name of the cloud registry (src/app/registry/clouds.ts), e.g. `gcp`. */
export type Csp = string;

/** Where the node writes its files (upstream's paths by default). */
export interface NodePaths {
  /** node_state.json (upstream: /run/state/constellation/node_state.json). */
  nodeState: string;
  /** Control-plane files directory. */
  pkiDir: string;
  kubeletCertPath: string;
  kubeletKeyPath: string;
}

/** Everything the node modules need to build the adapters. No secrets. */
export interface NodeConfig {
  csp: Csp;
  /** Never `dummy`: {@link nodeConfig} refuses it. */
  variant: Variant;
  /** tpm2-tools TCTI, default {@link DEVICE_TCTI}. */
  tcti: string;
  /** Persistent handle of the attestation key; default the variant's. */
  akHandle?: number;
  /** The LUKS2 state disk (block device or image file). */
  diskDevice: string;
  /** File holding the initial passphrase; default `/run/cryptsetup-keys.d/state.key`. */
  initialPassphrasePath?: string;
  paths: NodePaths;
  /**
   * Metadata endpoints: `baseUrl` is the metadata server or IMDS root, `apiEndpoint` the cloud API
   * (for local fakes, default the SDK's; OpenStack: the Nova compute endpoint, required),
   * `localAddress` the source address of metadata requests (qemu), `authTokenFile` a file holding
   * the cloud API token of metadata-only providers (OpenStack: a Keystone token, re-read on every
   * call; default `/run/confboot/cloud-api-token`).
   */
  metadata: { baseUrl?: string; apiEndpoint?: string; localAddress?: string; authTokenFile?: string };
  /** kubeadm binary; default `kubeadm` on PATH. */
  kubeadmPath?: string;
  /** pino level. */
  logLevel: string;
}

/** DI token for {@link NodeConfig}. */
export const NodeConfig = Symbol.for('confboot.NodeConfig');

/** What {@link nodeConfig} needs; everything else has a default. */
export type NodeConfigInput = { csp: string; variant: string; diskDevice: string } & Partial<
  Omit<NodeConfig, 'csp' | 'variant' | 'diskDevice' | 'paths'>
> & { paths?: Partial<NodePaths> };

/**
 * Fills in the defaults of a node config whose cloud and variant were checked against the
 * registries. Throws `invalid-argument` for an empty state disk device.
 */
export function withNodeDefaults(input: NodeConfigInput, csp: Csp, variant: Variant): NodeConfig {
  if (input.diskDevice === '')
    throw new ConfbootError('invalid-argument', 'node config: state disk device is empty');
  return {
    csp,
    variant,
    tcti: input.tcti ?? DEVICE_TCTI,
    ...(input.akHandle === undefined ? {} : { akHandle: input.akHandle }),
    diskDevice: input.diskDevice,
    ...(input.initialPassphrasePath === undefined
      ? {}
      : { initialPassphrasePath: input.initialPassphrasePath }),
    paths: {
      nodeState: input.paths?.nodeState ?? DEFAULT_NODE_STATE_PATH,
      pkiDir: input.paths?.pkiDir ?? DEFAULT_JOIN_PATHS.pkiDir,
      kubeletCertPath: input.paths?.kubeletCertPath ?? DEFAULT_JOIN_PATHS.kubeletCertPath,
      kubeletKeyPath: input.paths?.kubeletKeyPath ?? DEFAULT_JOIN_PATHS.kubeletKeyPath,
    },
    metadata: { ...input.metadata },
    ...(input.kubeadmPath === undefined ? {} : { kubeadmPath: input.kubeadmPath }),
    logLevel: input.logLevel ?? 'info',
  };
}
