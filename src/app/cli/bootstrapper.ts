/**
 * The bootstrapper program (app layer, CLI): parses the flags, builds the node's DI container (the
 * common module and the cloud module of its cloud) and runs {@link startBootstrapperNode}. Shared by
 * the per-cloud entrypoints (src/app/entrypoints/*.ts, cloud fixed) and `confboot bootstrapper --csp
 * C` ({@link run}); only the chosen cloud's adapter is loaded.
 *
 * Exit codes: 0 once the node is bootstrapped (initialised, joined, or already bootstrapped: PCR 15
 * set, its kubelet restarted); 1 after a failure (past the node lock the state disk was marked for
 * reset and the reboot command run; before it nothing was changed) or when stopped by a
 * signal first; 2 for usage errors. `--check-wiring` resolves every binding and exits 0 without
 * touching the TPM, the disk or the network.
 */

import { STATE_DISK_INTEGRITY_MODES } from '../../adapters/disk/cryptsetup-state-disk-setup.js';
import { RECOVERY_PORT } from '../../adapters/grpc/recover.js';
import {
  CommandKubeletService,
  SYSTEMCTL_RESTART_KUBELET,
} from '../../adapters/kubernetes/kubelet-service.js';
import { commandWords } from '../../adapters/system/bounded-command.js';
import { CommandPowerControl, SYSTEMCTL_REBOOT } from '../../adapters/system/command-power-control.js';
import { DEFAULT_SHARE_TTL_MS } from '../../domain/recovery-shares.js';
import { messageOf } from '../../ports/errors.js';
import { splitHostPort } from '../../ports/peer-address.js';
import { createNodeDiskMapper, type DiskMapperOutcome } from '../bootstrapper/disk-mapper.js';
import { type BootstrapperNode, type BootstrapResult, startBootstrapperNode } from '../bootstrapper/node.js';
import { BOOTSTRAPPER_PORT, JOIN_SERVICE_PORT } from '../defaults.js';
import {
  bootstrapperDeps,
  type Csp,
  checkWiring,
  createNodeContainer,
  type NodeConfig,
} from '../modules/index.js';
import { runCommand, UsageError } from '../program/args.js';
import {
  defineCommand,
  duration,
  formatDuration,
  type OptionValues,
  oneOf,
  parseOptions,
  wholeNumber,
} from '../program/options.js';
import { cloudOption, LOG_LEVEL_OPTION, variantOption } from '../program/shared-options.js';
import { untilStopSignal } from '../program/signals.js';
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
type BootstrapperValues = OptionValues<ReturnType<typeof bootstrapperCommand>['options']>;

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

/** In-process options (tests, embedding). */
export interface BootstrapperRunOptions {
  /** Stops the node when aborted, like SIGTERM. */
  signal?: AbortSignal;
  /** Where the one-line outcome goes; default stdout. */
  out?: NodeJS.WritableStream;
  /** Called once the init server listens, with its port. */
  onListening?: (port: number) => void;
  /** Called once a control plane's recovery endpoint listens, with its port. */
  onRecoveryListening?: (port: number) => void;
  /** Called when the disk mapper has finished, with its outcome. */
  onDiskMapped?: (outcome: DiskMapperOutcome['outcome']) => void;
  /** Called once the verification service listens (--verify-listen), with its port. */
  onVerificationListening?: (port: number) => void;
}

/** Builds the node config from parsed flags; usage errors for bad values (the `dummy` variant too). */
function configFromFlags(csp: Csp, v: BootstrapperValues): NodeConfig {
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

function describe(result: BootstrapResult, mapped: DiskMapperOutcome['outcome'], restarted: boolean): string {
  const id = result.clusterId ? ` (cluster ID ${Buffer.from(result.clusterId).toString('hex')})` : '';
  if (result.outcome === 'already-bootstrapped' && (mapped === 'rejoined' || mapped === 'recovered'))
    return `Node ${mapped === 'rejoined' ? 'rejoined' : 'was recovered'}: state disk open, PCR 15 marked again${restarted ? ', kubelet restarted' : ''}`;
  switch (result.outcome) {
    case 'initialized':
      return `Node initialised the cluster${id}`;
    case 'joined':
      return `Node joined the cluster${id}`;
    case 'already-bootstrapped':
      return `Node is already bootstrapped (PCR 15 is set); ${restarted ? 'kubelet restarted' : 'nothing to do'}`;
    case 'stopped':
      return 'Bootstrapper stopped before the node bootstrapped';
  }
}

/**
 * Runs the bootstrapper program with `argv` for cloud `csp` (fixed by an entrypoint) or, when
 * `csp` is undefined, the cloud named by `--csp`. Resolves to the exit code.
 */
export function runBootstrapper(
  argv: string[],
  csp: Csp | undefined,
  options: BootstrapperRunOptions = {},
): Promise<number> {
  return runCommand(async () => {
    const out = options.out ?? process.stdout;
    const values = parseOptions(argv, bootstrapperCommand(csp), out);
    if (values === undefined) return 0;
    if (csp !== undefined && values.cloud !== undefined && values.cloud !== csp)
      throw new UsageError(`--cloud: this entrypoint is for ${csp}, got "${values.cloud}"`);
    const named = values.cloud;
    if (csp === undefined && named === undefined)
      throw new UsageError(
        'missing required option --cloud (or CONFBOOT_CLOUD); see confboot bootstrapper --help',
      );
    let cloud: Csp;
    try {
      cloud = csp ?? cspFromString(named ?? '');
    } catch (err) {
      throw new UsageError(`--cloud: ${messageOf(err)}`);
    }
    const config = configFromFlags(cloud, values);
    const listen = values['init-listen'];
    const joinServicePort = values['join-service-port'];
    const recoveryListen = values['recovery-listen'];
    const shareTtlMs = values['recovery-share-ttl'];
    const formatIterations = values['format-pbkdf2-iterations'];

    const restart = values['kubelet-restart-command'];
    const reboot = values['reboot-command'];

    if (values['preload-sdk']) await cloudEntry(cloud).preload();
    const container = await createNodeContainer(config);
    if (values['check-wiring']) {
      const names = await checkWiring(container);
      out.write(`Wiring of ${cloud}/${config.variant} resolves: ${names.length} bindings\n`);
      return 0;
    }

    const deps = await bootstrapperDeps(container);
    if (restart !== undefined) deps.kubelet = new CommandKubeletService(restart);
    if (reboot !== undefined) deps.power = new CommandPowerControl(reboot);
    const mapping = values['state-mapping'];
    const integrity = values['state-disk-integrity'];
    const mountPoint = values['state-mount'];
    if (mapping === 'none' && mountPoint !== undefined)
      throw new UsageError('--state-mount needs a dm-crypt mapping (not --state-mapping none)');
    const mapper = createNodeDiskMapper(deps, {
      disk: {
        devicePath: config.diskDevice,
        integrity,
        ...(config.initialPassphrasePath === undefined
          ? {}
          : { initialPassphrasePath: config.initialPassphrasePath }),
        ...(mapping === 'none' ? {} : { mappingName: mapping }),
        ...(mountPoint === undefined ? {} : { mountPoint }),
        ...(formatIterations === undefined
          ? {}
          : { formatPbkdfArgs: ['--pbkdf', 'pbkdf2', '--pbkdf-force-iterations', String(formatIterations)] }),
      },
      recoveryListen,
      joinServicePort,
      shares: { shareTtlMs },
      ...(options.onRecoveryListening ? { onRecoveryListening: options.onRecoveryListening } : {}),
    });
    const verifyListen = values['verify-listen'];
    let node: BootstrapperNode | undefined;
    let stopping = false;
    const stop = () => {
      stopping = true;
      mapper.stop();
      void node?.stop();
    };
    return untilStopSignal(
      async (stopSignal) => {
        if (stopSignal.aborted) stop();
        else stopSignal.addEventListener('abort', stop, { once: true });
        let mapped: DiskMapperOutcome;
        try {
          mapped = await mapper.run();
        } catch (err) {
          throw new Error(`disk mapper failed: ${messageOf(err)}`);
        }
        options.onDiskMapped?.(mapped.outcome);
        if (mapped.outcome === 'stopped') {
          out.write('Disk mapper stopped before the state disk was ready\n');
          return 1;
        }
        if (values['disk-mapper-only'] === true) {
          out.write(`State disk ready (${mapped.outcome})\n`);
          return 0;
        }
        node = await startBootstrapperNode(deps, {
          initListen: listen,
          joinServicePort,
          ...(verifyListen === undefined ? {} : { verification: { listen: verifyListen } }),
          paths: {
            pkiDir: config.paths.pkiDir,
            kubeletCertPath: config.paths.kubeletCertPath,
            kubeletKeyPath: config.paths.kubeletKeyPath,
          },
        });
        if (node.initPort !== undefined) options.onListening?.(node.initPort);
        if (stopping) void node.stop();
        let result: BootstrapResult;
        try {
          result = await node.done;
        } catch (err) {
          throw new Error(`bootstrapping failed: ${messageOf(err)}`);
        }
        out.write(`${describe(result, mapped.outcome, deps.kubelet !== undefined)}\n`);
        const verifyPort = await node.verification?.listening;
        if (verifyPort !== undefined && !stopSignal.aborted) {
          options.onVerificationListening?.(verifyPort);
          // The verification service runs until SIGTERM/SIGINT; stop() closes it.
          await new Promise((resolve) => stopSignal.addEventListener('abort', resolve, { once: true }));
        }
        return result.outcome === 'stopped' ? 1 : 0;
      },
      {
        onSignal: (sig) => deps.logger.info('Stopping', { signal: sig }),
        ...(options.signal ? { signal: options.signal } : {}),
      },
    );
  });
}

/** Runs `confboot bootstrapper`; resolves to the exit code. */
export function run(argv: string[], options: BootstrapperRunOptions = {}): Promise<number> {
  return runBootstrapper(argv, undefined, options);
}

/** The command's option table (of `confboot bootstrapper`; an entrypoint fixes the cloud). */
export const commandSpecs = [bootstrapperCommand()];
