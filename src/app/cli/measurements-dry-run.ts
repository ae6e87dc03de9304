/**
 * `confboot measurements dry-run`: replays the join service's recorded evidence (evidence.jsonl
 * under its --state-dir, or the cluster's EvidenceRecord resources) against a new attestation config and prints, per node, whether the new
 * config would accept it and why (src/app/join-service/dry-run.ts). Exit 0 no joined node would be
 * refused, 1 one would, 2 usage or input error.
 */
import { readFile, stat } from 'node:fs/promises';
import { silentLogger } from '../../adapters/log/pino-logger.js';
import { JsonlEvidenceStore, parseEvidenceFile } from '../../adapters/state/jsonl-evidence-store.js';
import { importOptionalPeer } from '../../adapters/system/optional-peer.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { messageOf } from '../../ports/errors.js';
import type { Validator } from '../../ports/validator.js';
import type { Variant } from '../../ports/variant.js';
import { dryRun, renderDryRun } from '../join-service/dry-run.js';
import { validatorBuilder, variantLookups } from '../join-service/production.js';
import { UsageError } from '../program/args.js';
import { defineCommand, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { OUTPUT_OPTION } from '../program/shared-options.js';
import { isVariant } from '../registry/index.js';

/** The default evidence source: the --state-dir docs/attestation-config.md suggests for the join service. */
export const DEFAULT_EVIDENCE_SOURCE = '/var/lib/confboot/join-service';

/** Flags of `confboot measurements dry-run`. */
export const dryRunCommand = defineCommand({
  name: 'measurements dry-run',
  summary:
    "Replay every node's recorded evidence against a new attestation config and print, per node, accepted or refused and why.",
  options: {
    config: {
      type: 'string',
      valueName: 'NEW.json',
      required: true,
      description: 'the new attestation config',
    },
    evidence: {
      type: 'string',
      valueName: 'SOURCE',
      default: DEFAULT_EVIDENCE_SOURCE,
      description:
        "the join service's --state-dir, its evidence.jsonl file, or `cluster`: the EvidenceRecord resources of the cluster (--evidence-store=cluster) through --kubeconfig",
    },
    kubeconfig: {
      type: 'string',
      valueName: 'F',
      description:
        'with --evidence cluster: kubeconfig of the cluster (default $KUBECONFIG, else the in-cluster service account)',
    },
    'qemu-ak-registry': {
      type: 'string',
      valueName: 'F',
      description: 'qemu-vtpm: registered attestation keys, as the join service uses them',
    },
    'trust-ak-as-carried': {
      type: 'boolean',
      description:
        'qemu-vtpm without --qemu-ak-registry: trust the attestation key each record carries, as a join service started with this flag does',
    },
    'amd-kds-url': { type: 'string', valueName: 'URL', description: 'SEV-SNP: AMD KDS or a mirror' },
    output: OUTPUT_OPTION,
  },
  epilog: [
    'The evidence is what the join service verified (document and the TLS-exporter nonce it bound); each',
    "record is validated again with a validator built from NEW for the record's variant. A joined node is",
    'one whose latest ticket was issued.',
  ].join('\n'),
  exitCodes: {
    0: 'no joined node would be refused',
    1: 'a joined node would be refused (or the cluster could not be read)',
  },
});

/** The --evidence value that reads the cluster's EvidenceRecord resources. */
export const CLUSTER_EVIDENCE_SOURCE = 'cluster';

async function readClusterEvidence(kubeconfigPath: string | undefined) {
  const [{ loadKubeConfig }, { KubeEvidenceStore }] = await importOptionalPeer(() =>
    Promise.all([
      import('../../adapters/kubernetes/api.js'),
      import('../../adapters/kubernetes/evidence-store.js'),
    ]),
  );
  let kubeConfig: ReturnType<typeof loadKubeConfig>;
  try {
    kubeConfig = loadKubeConfig(kubeconfigPath);
  } catch (err) {
    throw new UsageError(`reading evidence from the cluster: ${messageOf(err)}`);
  }
  const store = new KubeEvidenceStore({ kubeConfig, clock: new SystemClock(), logger: silentLogger });
  return store.list();
}

async function readEvidence(source: string, kubeconfigPath: string | undefined) {
  if (source === CLUSTER_EVIDENCE_SOURCE)
    return readClusterEvidence(kubeconfigPath ?? process.env.KUBECONFIG);
  let path = source;
  try {
    if ((await stat(source)).isDirectory()) path = JsonlEvidenceStore.pathIn(source);
    return parseEvidenceFile(await readFile(path, 'utf8'));
  } catch (err) {
    throw new UsageError(`reading evidence ${path}: ${messageOf(err)}`);
  }
}

/** Runs the verb; resolves to the exit code (usage errors throw UsageError). */
export async function runDryRun(argv: string[]): Promise<number> {
  const v = parseOptions(argv, dryRunCommand);
  if (v === undefined) return 0;
  const configPath = v.config;
  let config: Uint8Array;
  try {
    config = await readFile(configPath);
  } catch (err) {
    throw new UsageError(`reading ${configPath}: ${messageOf(err)}`);
  }
  const records = await readEvidence(v.evidence, v.kubeconfig);
  const clock = new SystemClock();
  const validators = new Map<string, Validator | undefined>();
  for (const variant of new Set(records.map((r) => r.variant))) {
    if (!isVariant(variant)) {
      validators.set(variant, undefined);
      continue;
    }
    const lookups = await variantLookups(
      variant as Variant,
      {
        qemuAkRegistryPath: v['qemu-ak-registry'],
        trustAkAsCarried: v['trust-ak-as-carried'],
        amdKdsUrl: v['amd-kds-url'],
      },
      clock,
    );
    try {
      validators.set(variant, validatorBuilder(variant as Variant, lookups, clock, silentLogger)(config));
    } catch (err) {
      throw new UsageError(`${configPath}: ${messageOf(err)}`);
    }
  }
  const report = await dryRun(records, (variant) => validators.get(variant));
  const code = report.wouldRefuseJoined.length === 0 ? 0 : 1;
  return printResult(v.output, 'measurements dry-run', code, report, renderDryRun);
}
