/**
 * The bootstrapper program (app layer): parses the flags, builds the node's DI container from the
 * common module and ONE cloud module, and runs {@link startBootstrapperNode}. Shared by the per-cloud
 * entrypoints (src/app/entrypoints/*.ts, cloud fixed) and `confboot bootstrapper --csp C`.
 *
 * Exit codes: 0 once the node is bootstrapped (initialised, joined, or already bootstrapped: PCR 15
 * set); 1 after a failure (past the node lock the state disk was marked for reset; before it nothing
 * was changed) or when stopped by a
 * signal first; 2 for usage errors. `--check-wiring` resolves every binding and exits 0 without
 * touching the TPM, the disk or the network.
 */

import { messageOf } from '../../ports/errors.js';
import { splitHostPort } from '../../ports/peer-address.js';
import { type CommandSpec, parseCommand, runCommand, UsageError } from '../cli/args.js';
import { BOOTSTRAPPER_PORT, JOIN_SERVICE_PORT } from '../defaults.js';
import {
  bootstrapperDeps,
  type Csp,
  checkWiring,
  createNodeContainer,
  moduleForCsp,
  type NodeConfig,
} from '../modules/index.js';
import { cloudEntry, cloudNames, cloudVariants, cspFromString, nodeConfig } from '../registry/index.js';
import { type BootstrapResult, startBootstrapperNode } from './node.js';

/** Options of the bootstrapper program; `csp` is added by `confboot bootstrapper` only. */
export function bootstrapperCommand(csp?: Csp): CommandSpec {
  const variants = csp ? cloudVariants(csp) : [...new Set(cloudNames().flatMap((c) => cloudVariants(c)))];
  const entrypoints = cloudNames().filter((c) => cloudEntry(c).entrypoint === true);
  return {
    name: csp ? `bootstrapper (${csp} entrypoint)` : 'bootstrapper',
    env: true,
    summary:
      'Bootstrap this node: serve Init on the init port and ask the join service for a join ticket, ' +
      'side by side; whichever first yields a cluster ID takes the node lock.',
    options: {
      ...(csp
        ? {}
        : {
            csp: {
              type: 'string',
              valueName: 'C',
              required: true,
              description: `cloud: ${cloudNames().join(', ')} (own entrypoints, cloud fixed: ${entrypoints.map((c) => `entrypoints/${c}.js`).join(', ')})`,
            },
          }),
      'attestation-variant': {
        type: 'string',
        valueName: 'V',
        description: `attestation variant: ${variants.join(', ')} (default: the cloud's first${csp ? '' : '; each cloud takes only its own'})`,
      },
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
      },
      'join-service-port': {
        type: 'string',
        valueName: 'PORT',
        default: String(JOIN_SERVICE_PORT),
        description: 'join service port on control-plane endpoints',
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
      'node-state-file': { type: 'string', valueName: 'F', description: 'node_state.json path' },
      'pki-dir': { type: 'string', valueName: 'DIR', description: 'control-plane files directory' },
      'kubelet-cert': { type: 'string', valueName: 'F', description: 'kubelet client certificate path' },
      'kubelet-key': { type: 'string', valueName: 'F', description: 'kubelet client key path' },
      kubeadm: { type: 'string', valueName: 'PATH', description: 'kubeadm binary (default kubeadm on PATH)' },
      'log-level': { type: 'string', valueName: 'L', default: 'info', description: 'pino log level' },
      'check-wiring': {
        type: 'boolean',
        description: 'resolve every binding and exit 0 without touching hardware',
      },
      'preload-sdk': {
        type: 'boolean',
        description: "load this cloud's SDK now (for the module-isolation check)",
      },
    },
    epilog:
      'Exit codes: 0 bootstrapped (or already: PCR 15 set), 1 failure (after the node lock the state disk\n' +
      'is marked for reset; before it nothing was changed)\n' +
      'or stopped by SIGTERM/SIGINT first, 2 usage error.',
  };
}

/** Splits `HOST:PORT` (IPv6 hosts in brackets). */
function parseHostPort(flag: string, value: string): { host: string; port: number } {
  const address = splitHostPort(value);
  if (!address) throw new UsageError(`--${flag}: expected HOST:PORT, got ${JSON.stringify(value)}`);
  return address;
}

function parsePort(flag: string, value: string): number {
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
}

/** Builds the node config from parsed flags; usage errors for bad values (the `dummy` variant too). */
function configFromFlags(csp: Csp, v: Record<string, string | boolean | string[] | undefined>): NodeConfig {
  const str = (k: string) => v[k] as string | undefined;
  const variant = str('attestation-variant') ?? (cloudVariants(csp)[0] as string);
  try {
    return nodeConfig({
      csp,
      variant,
      diskDevice: str('disk') as string,
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
      logLevel: str('log-level') ?? 'info',
    });
  } catch (err) {
    throw new UsageError(messageOf(err));
  }
}

function describe(result: BootstrapResult): string {
  const id = result.clusterId ? ` (cluster ID ${Buffer.from(result.clusterId).toString('hex')})` : '';
  switch (result.outcome) {
    case 'initialized':
      return `Node initialised the cluster${id}`;
    case 'joined':
      return `Node joined the cluster${id}`;
    case 'already-bootstrapped':
      return 'Node is already bootstrapped (PCR 15 is set); nothing to do';
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
    const values = parseCommand(argv, bootstrapperCommand(csp), out);
    if (values === undefined) return 0;
    let cloud: Csp;
    try {
      cloud = csp ?? cspFromString(values.csp as string);
    } catch (err) {
      throw new UsageError(`--csp: ${messageOf(err)}`);
    }
    const config = configFromFlags(cloud, values);
    const listen = parseHostPort('init-listen', values['init-listen'] as string);
    const joinServicePort = parsePort('join-service-port', values['join-service-port'] as string);

    if (values['preload-sdk']) await (await moduleForCsp(cloud)).preloadSdk();
    const container = await createNodeContainer(config);
    if (values['check-wiring']) {
      const names = await checkWiring(container);
      out.write(`Wiring of ${cloud}/${config.variant} resolves: ${names.length} bindings\n`);
      return 0;
    }

    const deps = await bootstrapperDeps(container);
    const node = await startBootstrapperNode(deps, {
      initListen: listen,
      joinServicePort,
      paths: {
        pkiDir: config.paths.pkiDir,
        kubeletCertPath: config.paths.kubeletCertPath,
        kubeletKeyPath: config.paths.kubeletKeyPath,
      },
    });
    if (node.initPort !== undefined) options.onListening?.(node.initPort);
    const onSignal = (sig: NodeJS.Signals) => {
      deps.logger.info('Stopping', { signal: sig });
      void node.stop();
    };
    const onAbort = () => void node.stop();
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
    options.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      const result = await node.done;
      out.write(`${describe(result)}\n`);
      return result.outcome === 'stopped' ? 1 : 0;
    } catch (err) {
      throw new Error(`bootstrapping failed: ${messageOf(err)}`);
    } finally {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      options.signal?.removeEventListener('abort', onAbort);
    }
  });
}
