/**
 * The option table of the bootstrapper program (`confboot bootstrapper` and the per-cloud
 * entrypoints): its flags, their parsers, and how the parsed values become the cloud and the node
 * config the container is built from. The wiring that runs the node is bootstrapper.ts.
 */

import { STATE_DISK_INTEGRITY_MODES } from '../../adapters/disk/cryptsetup-state-disk-setup.js';
import { RECOVERY_PORT } from '../../adapters/grpc/recover.js';
import { SYSTEMCTL_RESTART_KUBELET } from '../../adapters/kubernetes/kubelet-service.js';
import { commandWords } from '../../adapters/system/bounded-command.js';
import { SYSTEMCTL_REBOOT } from '../../adapters/system/command-power-control.js';
import { DEFAULT_SHARE_TTL_MS } from '../../domain/recovery-shares.js';
import { messageOf } from '../../ports/errors.js';
import { splitHostPort } from '../../ports/peer-address.js';
import type { StateDiskOptions } from '../bootstrapper/disk-mapper.js';
import { BOOTSTRAPPER_PORT, JOIN_SERVICE_PORT } from '../defaults.js';
import type { Csp, NodeConfig } from '../modules/index.js';
import { UsageError } from '../program/args.js';
import {
  defineCommand,
  duration,
  formatDuration,
  type OptionValues,
  oneOf,
  wholeNumber,
} from '../program/options.js';
import { cloudOption, LOG_LEVEL_OPTION, variantOption } from '../program/shared-options.js';
import { cloudEntry, cloudNames, cloudVariants, cspFromString, nodeConfig } from '../registry/index.js';

/** Where the node serves recovery (a control plane waiting for it) and verification. */
const LISTEN_OPTIONS = {
  'recovery-listen': {
    type: 'string',
    valueName: 'HOST:PORT',
    default: `0.0.0.0:${RECOVERY_PORT}`,
    description: 'where a control plane waiting for recovery serves it (attested TLS)',
    parse: hostPortOption,
  },
  'verify-listen': {
    type: 'string',
    valueName: 'HOST:PORT',
    description:
      'serve the verification service here once the node is bootstrapped, and keep running until stopped (docs/verification-service.md); default: not served',
    parse: hostPortOption,
  },
} as const;

/** Where the node keeps its state and finds kubeadm (defaults: the node config's). */
const NODE_PATH_OPTIONS = {
  'node-state-file': { type: 'string', valueName: 'F', description: 'node_state.json path' },
  'pki-dir': { type: 'string', valueName: 'DIR', description: 'control-plane files directory' },
  'kubelet-cert': { type: 'string', valueName: 'F', description: 'kubelet client certificate path' },
  'kubelet-key': { type: 'string', valueName: 'F', description: 'kubelet client key path' },
  kubeadm: { type: 'string', valueName: 'PATH', description: 'kubeadm binary (default kubeadm on PATH)' },
} as const;

/**
 * Options of the bootstrapper program. `--cloud` is required by `confboot bootstrapper` and fixed by
 * an entrypoint (`csp`).
 */
export function bootstrapperCommand(csp?: Csp) {
  const variants = csp ? cloudVariants(csp) : [...new Set(cloudNames().flatMap((c) => cloudVariants(c)))];
  const entrypoints = cloudNames().filter((c) => cloudEntry(c).entrypoint === true);
  return defineCommand({
    name: csp ? `bootstrapper (${csp} entrypoint)` : 'bootstrapper',
    env: true,
    kind: 'service',
    summary:
      'Bootstrap this node. First the disk mapper: format a blank state disk, wipe one marked for ' +
      'reset, or reopen one set up before (rejoin ticket; on a control plane also recovery). Then ' +
      'serve Init on the init port and ask the join service for a join ticket, side by side; ' +
      'whichever first yields a cluster ID takes the node lock.',
    options: {
      cloud: cloudOption({
        required: false,
        what: 'cloud',
        note: csp
          ? ` (this entrypoint's: ${csp}, the only one it takes)`
          : ` (required; own entrypoints, cloud fixed: ${entrypoints.map((c) => `entrypoints/${c}.js`).join(', ')})`,
      }),
      variant: variantOption({
        required: false,
        what: 'attestation variant',
        names: () => variants,
        note: ` (default: the cloud's first${csp ? '' : '; each cloud takes only its own'})`,
      }),
      tcti: { type: 'string', valueName: 'T', description: 'tpm2-tools TCTI (default device:/dev/tpmrm0)' },
      disk: {
        type: 'string',
        valueName: 'DEV',
        required: true,
        description: 'LUKS2 state disk (device or image)',
      },
      'initial-passphrase-file': {
        type: 'string',
        valueName: 'F',
        secret: 'file',
        description: 'initial state disk passphrase (default /run/cryptsetup-keys.d/state.key)',
      },
      'init-listen': {
        type: 'string',
        valueName: 'HOST:PORT',
        default: `0.0.0.0:${BOOTSTRAPPER_PORT}`,
        description: 'where the init server listens',
        parse: hostPortOption,
      },
      'join-service-port': {
        type: 'string',
        valueName: 'PORT',
        default: String(JOIN_SERVICE_PORT),
        description: 'join service port on control-plane endpoints',
        parse: portOption,
      },
      'metadata-url': {
        type: 'string',
        valueName: 'URL',
        description: "metadata server / IMDS root (default the cloud's)",
      },
      'cloud-api-endpoint': {
        type: 'string',
        valueName: 'URL',
        description: "cloud API endpoint (default the SDK's)",
      },
      'cloud-auth-token-file': {
        type: 'string',
        valueName: 'F',
        secret: 'file',
        description: 'file with the cloud API token, re-read per call (openstack)',
      },
      'metadata-local-address': {
        type: 'string',
        valueName: 'IP',
        description: 'source address for metadata requests (qemu)',
      },
      'state-mapping': {
        type: 'string',
        valueName: 'NAME',
        default: 'state',
        description:
          "dm-crypt mapping of a reopened state disk; 'none' only checks the key (no device-mapper)",
      },
      'state-mount': {
        type: 'string',
        valueName: 'DIR',
        description:
          "mount a reopened state disk's mapping at DIR before its node state is read (e.g. /run/state; default: not mounted)",
      },
      'state-disk-integrity': {
        type: 'string',
        valueName: 'MODE',
        default: 'hmac-sha256',
        description:
          "integrity of the state disk: 'hmac-sha256' (LUKS2 authenticated encryption; a sector the host changed fails to read) or 'none' (aes-xts-plain64 only, for hosts without dm-integrity); a header without the required integrity is refused",
        parse: oneOf(STATE_DISK_INTEGRITY_MODES),
      },
      'format-pbkdf2-iterations': {
        type: 'string',
        valueName: 'N',
        description: "format a blank disk with PBKDF2 of N iterations (default cryptsetup's Argon2id)",
        parse: wholeNumber(1),
      },
      ...LISTEN_OPTIONS,
      'recovery-share-ttl': {
        type: 'string',
        valueName: 'DURATION',
        default: formatDuration(DEFAULT_SHARE_TTL_MS),
        aliases: ['recovery-share-ttl-seconds'],
        description: 'how long a received recovery share is kept in memory; a bare number counts seconds',
        parse: duration('s', 1000),
      },
      'kubelet-restart-command': {
        type: 'string',
        valueName: 'CMD',
        default: SYSTEMCTL_RESTART_KUBELET.join(' '),
        description:
          "run on a node bootstrapped before (a reboot; words split on spaces, no shell); 'none' restarts nothing",
        parse: commandOption,
      },
      'reboot-command': {
        type: 'string',
        valueName: 'CMD',
        default: SYSTEMCTL_REBOOT.join(' '),
        description:
          "run after a failure past the node lock, once the state disk is marked for reset; 'none' only exits 1",
        parse: commandOption,
      },
      'disk-mapper-only': {
        type: 'boolean',
        description:
          'run only the disk mapper and exit 0 once the state disk is ready (its own systemd unit)',
      },
      ...NODE_PATH_OPTIONS,
      'log-level': LOG_LEVEL_OPTION,
      'check-wiring': {
        type: 'boolean',
        description: 'resolve every binding and exit 0 without touching hardware',
      },
      'preload-sdk': {
        type: 'boolean',
        description: "load this cloud's SDK now (for the module-isolation check)",
      },
    },
    exitCodes: {
      0: 'bootstrapped (or already: PCR 15 set, e.g. rejoined after a reboot, the kubelet restarted)',
      1: 'failure (after the node lock the state disk is marked for reset and the reboot command run; before it nothing was changed) or stopped by SIGTERM/SIGINT first',
    },
  });
}

/** The parsed options of the bootstrapper program. */
export type BootstrapperValues = OptionValues<ReturnType<typeof bootstrapperCommand>['options']>;

/** `parse` for `HOST:PORT` (IPv6 hosts in brackets). */
function hostPortOption(value: string, flag: string): { host: string; port: number } {
  const address = splitHostPort(value);
  if (!address) throw new UsageError(`--${flag}: expected HOST:PORT, got ${JSON.stringify(value)}`);
  return address;
}

/** `parse` for a command flag: its words; undefined for `none`; a usage error when it holds no word. */
function commandOption(line: string, flag: string): string[] | undefined {
  if (line.trim() === 'none') return undefined;
  const words = commandWords(line);
  if (words.length === 0) throw new UsageError(`--${flag}: expected a command or 'none'`);
  return words;
}

/** `parse` for a port 1–65535. */
function portOption(value: string, flag: string): number {
  const port = Number(value);
  if (!/^\d{1,5}$/.test(value) || port < 1 || port > 65535)
    throw new UsageError(`--${flag}: expected a port, got ${JSON.stringify(value)}`);
  return port;
}

/**
 * The cloud the node runs on: the entrypoint's `csp`, or `--cloud` for `confboot bootstrapper`.
 * @throws UsageError when `--cloud` is missing, unknown, or not the entrypoint's cloud
 */
export function cloudFromOptions(csp: Csp | undefined, values: Pick<BootstrapperValues, 'cloud'>): Csp {
  if (csp !== undefined && values.cloud !== undefined && values.cloud !== csp)
    throw new UsageError(`--cloud: this entrypoint is for ${csp}, got "${values.cloud}"`);
  const named = values.cloud;
  if (csp === undefined && named === undefined)
    throw new UsageError(
      'missing required option --cloud (or CONFBOOT_CLOUD); see confboot bootstrapper --help',
    );
  try {
    return csp ?? cspFromString(named ?? '');
  } catch (err) {
    throw new UsageError(`--cloud: ${messageOf(err)}`);
  }
}

/** Builds the node config from parsed flags; usage errors for bad values (the `dummy` variant too). */
export function nodeConfigFromOptions(csp: Csp, v: BootstrapperValues): NodeConfig {
  const str = (k: keyof BootstrapperValues & string): string | undefined => {
    const value = v[k];
    return typeof value === 'string' ? value : undefined;
  };
  const variant = v.variant ?? cloudVariants(csp)[0] ?? '';
  try {
    return nodeConfig({
      csp,
      variant,
      diskDevice: v.disk,
      ...(str('tcti') === undefined ? {} : { tcti: str('tcti') }),
      ...(str('initial-passphrase-file') === undefined
        ? {}
        : { initialPassphrasePath: str('initial-passphrase-file') }),
      paths: {
        ...(str('node-state-file') === undefined ? {} : { nodeState: str('node-state-file') }),
        ...(str('pki-dir') === undefined ? {} : { pkiDir: str('pki-dir') }),
        ...(str('kubelet-cert') === undefined ? {} : { kubeletCertPath: str('kubelet-cert') }),
        ...(str('kubelet-key') === undefined ? {} : { kubeletKeyPath: str('kubelet-key') }),
      },
      metadata: {
        ...(str('metadata-url') === undefined ? {} : { baseUrl: str('metadata-url') }),
        ...(str('cloud-api-endpoint') === undefined ? {} : { apiEndpoint: str('cloud-api-endpoint') }),
        ...(str('metadata-local-address') === undefined
          ? {}
          : { localAddress: str('metadata-local-address') }),
        ...(str('cloud-auth-token-file') === undefined
          ? {}
          : { authTokenFile: str('cloud-auth-token-file') }),
      },
      ...(str('kubeadm') === undefined ? {} : { kubeadmPath: str('kubeadm') }),
      logLevel: v['log-level'],
    });
  } catch (err) {
    throw new UsageError(messageOf(err));
  }
}

/**
 * The state disk the disk mapper sets up, from the node config and the state-disk options.
 * @throws UsageError for `--state-mount` without a dm-crypt mapping
 */
export function stateDiskFromOptions(
  v: BootstrapperValues,
  config: Pick<NodeConfig, 'diskDevice' | 'initialPassphrasePath'>,
): StateDiskOptions {
  const mapping = v['state-mapping'];
  const mountPoint = v['state-mount'];
  const formatIterations = v['format-pbkdf2-iterations'];
  if (mapping === 'none' && mountPoint !== undefined)
    throw new UsageError('--state-mount needs a dm-crypt mapping (not --state-mapping none)');
  return {
    devicePath: config.diskDevice,
    integrity: v['state-disk-integrity'],
    ...(config.initialPassphrasePath === undefined
      ? {}
      : { initialPassphrasePath: config.initialPassphrasePath }),
    ...(mapping === 'none' ? {} : { mappingName: mapping }),
    ...(mountPoint === undefined ? {} : { mountPoint }),
    ...(formatIterations === undefined
      ? {}
      : { formatPbkdfArgs: ['--pbkdf', 'pbkdf2', '--pbkdf-force-iterations', String(formatIterations)] }),
  };
}
