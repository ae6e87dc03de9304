/**
 * `confboot recovery-shares`: splits an existing master secret into a new set of k-of-n recovery
 * share files, to rotate holders or change N and K after `confboot init` (docs/recovery.md,
 * "Rotating holders"). The cluster ID each share names is derived from the master secret and the
 * measurement salt, the two files `confboot init` kept, exactly as the nodes derive it, so the new
 * shares belong to the running cluster. Nothing is sent anywhere; the files are written exclusively
 * (an existing file is never overwritten) and a failed write leaves no partial set.
 */
import { clusterIdFromMaster } from '../../domain/key-derivation.js';
import { runCommand, UsageError } from '../program/args.js';
import { readInput } from '../program/input-file.js';
import { defineCommand, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { MASTER_SECRET_FILE_OPTION, OUTPUT_OPTION } from '../program/shared-options.js';
import { parseMasterSecretFile } from './operator-inputs.js';
import {
  checkSplitSecret,
  parseRecoveryShareFlags,
  RECOVERY_SHARE_OPTIONS,
  writeRecoveryShareFiles,
} from './recovery-share-files.js';

export const recoverySharesCommand = defineCommand({
  name: 'recovery-shares',
  summary:
    "Split the cluster's master secret into a new set of k-of-n recovery share files (rotate holders, change N or K).",
  options: {
    'master-secret-file': MASTER_SECRET_FILE_OPTION,
    'measurement-salt-file': {
      type: 'string',
      valueName: 'F',
      description:
        'the 32-byte measurement salt confboot init wrote (the shares name the cluster ID it gives)',
      required: true,
    },
    ...RECOVERY_SHARE_OPTIONS,
    'recovery-shares': { ...RECOVERY_SHARE_OPTIONS['recovery-shares'], default: undefined, required: true },
    output: OUTPUT_OPTION,
  },
  epilog: [
    'Usage: confboot recovery-shares --master-secret-file F --measurement-salt-file F --recovery-shares N',
    '         [--recovery-threshold K] [--recovery-share-dir DIR] [--recovery-holder-key F ...]',
    'A new split has new digests: old and new shares never combine, but until the old files are destroyed',
    'K old shares still rebuild the same secret (rotating holders does not rotate the secret).',
  ].join('\n'),
  exitCodes: { 0: 'written', 1: 'a file could not be written' },
});

/** Runs `confboot recovery-shares`. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const v = parseOptions(argv, recoverySharesCommand);
    if (v === undefined) return 0;
    const shares = parseRecoveryShareFlags(v);
    if (shares.total < 2) throw new UsageError('--recovery-shares: a split needs N ≥ 2');
    const { masterSecret, masterSalt } = parseMasterSecretFile(
      await readInput(v['master-secret-file'], '--master-secret-file'),
    );
    checkSplitSecret(masterSecret);
    const measurementSalt = await readInput(v['measurement-salt-file'], '--measurement-salt-file');
    if (measurementSalt.length !== 32)
      throw new UsageError('--measurement-salt-file must hold exactly 32 bytes');
    const clusterId = clusterIdFromMaster(masterSecret, masterSalt, measurementSalt);
    let files: string[];
    try {
      files = await writeRecoveryShareFiles({ masterSecret, masterSalt, clusterId, ...shares });
      process.stderr.write(
        `recovery-shares: wrote ${files.length} shares (any ${shares.threshold} recover the cluster): ${files.join(', ')}\n`,
      );
    } finally {
      masterSecret.fill(0);
      masterSalt.fill(0);
    }
    const result = { clusterId: Buffer.from(clusterId).toString('hex'), threshold: shares.threshold, files };
    return printResult(v.output, 'recovery-shares', 0, result, (r) => `Cluster ID: ${r.clusterId}`);
  });
}

/** The command's option table. */
export const commandSpecs = [recoverySharesCommand];
