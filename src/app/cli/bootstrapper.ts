/**
 * The bootstrapper program (app layer, CLI): parses its options (bootstrapper-options.ts), builds the node's DI container (the
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

import { CommandKubeletService } from '../../adapters/kubernetes/kubelet-service.js';
import { CommandPowerControl } from '../../adapters/system/command-power-control.js';
import type { BootstrapResult } from '../../domain/bootstrapper.js';
import type { DiskMapperOutcome } from '../../domain/disk-mapper.js';
import { messageOf } from '../../ports/errors.js';
import { createNodeDiskMapper } from '../bootstrapper/disk-mapper.js';
import { type BootstrapperNode, startBootstrapperNode } from '../bootstrapper/node.js';
import { bootstrapperDeps, type Csp, checkWiring, createNodeContainer } from '../modules/index.js';
import { runCommand } from '../program/args.js';
import { parseOptions } from '../program/options.js';
import { untilStopSignal } from '../program/signals.js';
import { cloudEntry } from '../registry/index.js';
import {
  bootstrapperCommand,
  cloudFromOptions,
  nodeConfigFromOptions,
  stateDiskFromOptions,
} from './bootstrapper-options.js';

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
    const cloud = cloudFromOptions(csp, values);
    const config = nodeConfigFromOptions(cloud, values);
    const listen = values['init-listen'];
    const joinServicePort = values['join-service-port'];
    const recoveryListen = values['recovery-listen'];
    const shareTtlMs = values['recovery-share-ttl'];

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
    const mapper = createNodeDiskMapper(deps, {
      disk: stateDiskFromOptions(values, config),
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
