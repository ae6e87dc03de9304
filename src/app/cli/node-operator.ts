/**
 * `confboot node-operator`: the cluster's node operator (src/app/node-operator/run.ts). Approves a
 * kubelet's client CSR only for the join ticket it was issued with, deletes JoiningNode records
 * once their Node is Ready or their deadline passed, and releases the DiskBindings of nodes that are
 * gone. With `--variant` and `--attestation-config` it also re-attests every joined node on an
 * interval through its verification service (docs/reattestation.md). Runs until SIGTERM or SIGINT;
 * `--once` runs one round and prints what it did as JSON.
 */
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import { DEFAULT_REATTEST_CONCURRENCY, DEFAULT_REATTEST_INTERVAL_MS } from '../../domain/reattestation.js';
import { ATTESTATION_SETTINGS } from '../join-service/settings.js';
import { tdxCollateralSource } from '../join-service/settings-by-owner.js';
import type { ReattestationSettings } from '../node-operator/reattestation.js';
import { DEFAULT_OPERATOR_INTERVAL_MS, runNodeOperator } from '../node-operator/run.js';
import { runCommand, UsageError } from '../program/args.js';
import {
  defineCommand,
  duration,
  formatDuration,
  hostPort,
  type OptionValues,
  parseOptions,
  wholeNumber,
} from '../program/options.js';
import { printResult } from '../program/output.js';
import {
  attestationConfigOption,
  OUTPUT_OPTION,
  parseClusterIdHex,
  variantOption,
} from '../program/shared-options.js';
import { untilStopSignal } from '../program/signals.js';
import { VERIFICATION_SERVICE_PORT } from '../verification-service/serve.js';
import { AK_TRUST_OPTIONS, akTrustSettings } from './operator-inputs.js';

/** Flags of `confboot node-operator`. */
export const nodeOperatorCommand = defineCommand({
  name: 'node-operator',
  env: true,
  kind: 'service',
  summary:
    "Approve kubelet client CSRs only for their join ticket, delete JoiningNodes of Ready nodes, release gone nodes' DiskBindings, and re-attest joined nodes.",
  options: {
    kubeconfig: {
      type: 'string',
      valueName: 'F',
      description: "kubeconfig to use (default: the pod's ServiceAccount)",
    },
    interval: {
      type: 'string',
      valueName: 'DURATION',
      default: formatDuration(DEFAULT_OPERATOR_INTERVAL_MS),
      aliases: ['interval-seconds'],
      description: 'time between two rounds, 1s to 1h; a bare number counts seconds',
      parse: (raw: string, flag: string) => {
        const ms = duration('s')(raw, flag);
        if (ms < 1000 || ms > 3_600_000) throw new UsageError(`--${flag}: want 1s to 1h, got "${raw}"`);
        return ms;
      },
    },
    once: {
      type: 'boolean',
      description: 'run one round (and one re-attestation round), print its report and exit',
    },
    variant: variantOption({
      required: false,
      what: 'attestation variant of the nodes; turns re-attestation on (with --attestation-config)',
    }),
    'attestation-config': attestationConfigOption({
      required: false,
      note: '; the file in force, read again every re-attestation round',
    }),
    ...AK_TRUST_OPTIONS,
    // The join service's lookups, so a node is re-attested as it was admitted.
    'amd-kds-url': ATTESTATION_SETTINGS['amd-kds-url'],
    'tdx-collateral': ATTESTATION_SETTINGS['tdx-collateral'],
    'tdx-root-crl-url': ATTESTATION_SETTINGS['tdx-root-crl-url'],
    'cluster-id': {
      type: 'string',
      valueName: 'HEX',
      description:
        "vTPM variants: the cluster's ID; a joined node's node-lock register (PCR 15) is expected marked with it (required to re-attest them)",
      parse: parseClusterIdHex,
    },
    'cluster-id-file': {
      type: 'string',
      valueName: 'F',
      description:
        'vTPM variants, instead of --cluster-id: a file holding it in hex, read again every round (the clusterId key of ConfigMap join-config); empty: not known yet, the round waits',
    },
    'reattest-interval': {
      type: 'string',
      valueName: 'DURATION',
      default: formatDuration(DEFAULT_REATTEST_INTERVAL_MS),
      description: 'time between two re-attestation rounds; 0 turns re-attestation off',
      parse: duration('s'),
    },
    'reattest-cordon': {
      type: 'boolean',
      description: 'cordon a node whose re-attestation failed (spec.unschedulable; never drained or deleted)',
    },
    'reattest-concurrency': {
      type: 'string',
      valueName: 'N',
      default: String(DEFAULT_REATTEST_CONCURRENCY),
      description: 'nodes re-attested at once',
      parse: wholeNumber(1),
    },
    'reattest-deadline': {
      type: 'string',
      valueName: 'DURATION',
      default: '10s',
      description: 'bound on re-attesting one node (asking and verifying); past it the node is unreachable',
      parse: duration('s', 1),
    },
    'verification-port': {
      type: 'string',
      valueName: 'PORT',
      default: String(VERIFICATION_SERVICE_PORT),
      description: "the nodes' verification service port",
      parse: wholeNumber(1),
    },
    'metrics-listen': {
      type: 'string',
      valueName: 'HOST:PORT',
      description: 'serve the re-attestation metrics at http://HOST:PORT/metrics (default: not served)',
      parse: hostPort,
    },
    output: OUTPUT_OPTION,
  },
  epilog:
    'Re-attestation runs when --variant and --attestation-config are given and --reattest-interval is not 0. --once -o table prints the round as one JSON line; -o json the envelope around it.',
  exitCodes: {
    0: 'after a clean shutdown (SIGTERM/SIGINT) or a finished --once round',
    1: 'the cluster cannot be read (--once)',
  },
});

type Values = OptionValues<typeof nodeOperatorCommand.options>;

/** The re-attestation settings of the flags; undefined when it is off. */
export function reattestationSettings(values: Values): ReattestationSettings | undefined {
  const variant = values.variant;
  const config = values['attestation-config'];
  if (variant === undefined && config === undefined) return undefined;
  if (variant === undefined || config === undefined)
    throw new UsageError('re-attestation needs both --variant and --attestation-config');
  if (values['reattest-interval'] === 0) return undefined;
  if (values['verification-port'] > 65535) throw new UsageError('--verification-port: want at most 65535');
  if (values['cluster-id'] !== undefined && values['cluster-id-file'] !== undefined)
    throw new UsageError('give --cluster-id or --cluster-id-file, not both');
  return {
    variant,
    attestationConfigPath: config,
    ...(values['cluster-id'] === undefined ? {} : { clusterId: values['cluster-id'] }),
    ...(values['cluster-id-file'] === undefined ? {} : { clusterIdPath: values['cluster-id-file'] }),
    lookups: {
      ...akTrustSettings(values),
      amdKdsUrl: values['amd-kds-url'],
      tdxCollateral: tdxCollateralSource(values['tdx-collateral'], values['tdx-root-crl-url']),
    },
    intervalMs: values['reattest-interval'],
    cordon: Boolean(values['reattest-cordon']),
    port: values['verification-port'],
    concurrency: values['reattest-concurrency'],
    deadlineMs: values['reattest-deadline'],
  };
}

/** `confboot node-operator …`: resolves to the exit code. */
export function run(argv: string[]): Promise<number> {
  return untilStopSignal((signal) =>
    runCommand(async () => {
      const values = parseOptions(argv, nodeOperatorCommand);
      if (values === undefined) return 0;
      const reattestation = reattestationSettings(values);
      const report = await runNodeOperator({
        ...(values.kubeconfig === undefined ? {} : { kubeconfigPath: values.kubeconfig }),
        intervalMs: values.interval,
        once: values.once,
        signal,
        logger: createPinoLogger({ base: { component: 'node-operator' } }),
        ...(reattestation === undefined ? {} : { reattestation }),
        ...(values['metrics-listen'] === undefined ? {} : { metricsListen: values['metrics-listen'] }),
      });
      if (!values.once) return 0;
      return printResult(values.output, 'node-operator', 0, report, (r) => JSON.stringify(r));
    }),
  );
}

/** The command's option table. */
export const commandSpecs = [nodeOperatorCommand];
