/**
 * `confboot measurements <verb>`: expected measurements from a reference node's event log.
 *   from-event-log  replays a TCG event log and prints an attestation-config `measurements` block.
 *   diff            compares an attestation config with a replayed event log, per PCR, listing the
 *                   events that extended every PCR that differs.
 *   dry-run         replays the join service's recorded evidence against a new attestation config
 *                   (measurements-dry-run.ts).
 * Both use the replay of src/adapters/attestation/eventlog/measurements.ts (also exported by the
 * library for image builders). Exit 0 ok, 1 an enforced measurement differs (diff), 2 usage or input
 * error.
 */
import { stringify as toYaml } from 'yaml';
import {
  diffMeasurementsAgainstLog,
  type EventLogReplay,
  measurementsFromReplay,
  type PcrDiff,
  REPLAY_BANKS,
  type ReplayBank,
  replayTcgEventLog,
} from '../../adapters/attestation/eventlog/measurements.js';
import { parseAttestationConfig } from '../../domain/measurements.js';
import { isConfbootError } from '../../ports/errors.js';
import type { Measurements } from '../../ports/types.js';
import { type CommandSpec, runCommand, UsageError } from '../program/args.js';
import { readInput } from '../program/input-file.js';
import { defineCommand, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { OUTPUT_OPTION } from '../program/shared-options.js';
import { runVerb, type Verb } from './verbs.js';

const BANKS: ReplayBank[] = ['sha256', 'sha384'];
const EVENT_LOG_HELP =
  'raw TCG event log of a reference node, e.g. /sys/kernel/security/tpm0/binary_bios_measurements (TDX: the CCEL data)';

/** Flags of `confboot measurements from-event-log`. */
export const fromEventLogCommand = defineCommand({
  name: 'measurements from-event-log',
  summary:
    'Replay a TCG event log from a reference node and print an attestation-config "measurements" block.',
  options: {
    'event-log': { type: 'string', valueName: 'F', required: true, description: EVENT_LOG_HELP },
    pcrs: {
      type: 'string',
      valueName: 'LIST',
      description: 'comma-separated PCR indices, e.g. 4,8,9,11,12 (default: every PCR the log extends)',
      parse: (raw: string) => parsePcrList(raw),
    },
    bank: {
      type: 'string',
      valueName: 'sha256|sha384',
      default: 'sha256',
      description: 'bank to replay: sha256 for vTPM PCRs, sha384 for a TDX CCEL (RTMR0-3 = index 1-4)',
      parse: (raw: string) => parseBank(raw),
    },
    yaml: { type: 'boolean', description: 'print the block as YAML instead of JSON' },
    output: OUTPUT_OPTION,
  },
  epilog: [
    'Every value is enforced ("warnOnly": false); edit the block to relax one. A requested PCR the log',
    'never extends gets its reset value (zeros; ones for 17-22) and a warning on stderr: the log cannot',
    "predict what runs later (confboot's PCR 15 marker, IMA's PCR 10).",
    '-o table prints the block itself (JSON, or YAML with --yaml); -o json the envelope around it.',
  ].join('\n'),
  exitCodes: { 0: 'written' },
});

/** Flags of `confboot measurements diff`. */
export const diffCommand = defineCommand({
  name: 'measurements diff',
  summary:
    'Compare the measurements of an attestation config with a replayed event log, per PCR, with the events of each differing PCR.',
  options: {
    config: {
      type: 'string',
      valueName: 'F',
      required: true,
      description: 'attestation config (JSON) or a bare measurements map',
    },
    'event-log': { type: 'string', valueName: 'F', required: true, description: EVENT_LOG_HELP },
    bank: {
      type: 'string',
      valueName: 'sha256|sha384',
      description: 'bank to replay (default: sha256 for 32-byte values, sha384 for 48-byte values)',
      parse: (raw: string) => parseBank(raw),
    },
    output: OUTPUT_OPTION,
  },
  epilog: 'A PCR the log never extends is compared as its reset value (zeros; ones for 17-22).',
  exitCodes: { 0: 'every enforced measurement matches', 1: 'one differs' },
});

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function parseBank(value: string): ReplayBank {
  const bank = BANKS.find((b) => b === value);
  if (bank === undefined)
    throw new UsageError(`--bank: ${JSON.stringify(value)} is not one of ${BANKS.join(', ')}`);
  return bank;
}

/** Parses `--pcrs 4,8,9`: distinct indices 0–31, at least one. */
export function parsePcrList(value: string): number[] {
  const parts = value.split(',').map((p) => p.trim());
  if (parts.length === 0 || parts.some((p) => p === ''))
    throw new UsageError(`--pcrs: ${JSON.stringify(value)} is not a comma-separated list of PCR indices`);
  const out: number[] = [];
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]?)$/.test(p) || Number(p) > 31)
      throw new UsageError(`--pcrs: ${JSON.stringify(p)} is not a PCR index 0-31`);
    if (!out.includes(Number(p))) out.push(Number(p));
  }
  return out.sort((a, b) => a - b);
}

/** Replays the log; a malformed log or a missing bank is an input error (exit 2). */
async function replay(path: string, bank: ReplayBank): Promise<EventLogReplay> {
  const raw = await readInput(path, 'event log');
  try {
    return replayTcgEventLog(raw, bank);
  } catch (err) {
    if (!isConfbootError(err)) throw err;
    const hint = /has no sha256 bank; it has sha1$/.test(err.message)
      ? ' (attestation configs hold SHA-256 PCR values; a SHA-1-only log cannot give them)'
      : '';
    throw new UsageError(`${path}: ${err.message}${hint}`);
  }
}

async function fromEventLog(argv: string[]): Promise<number> {
  const v = parseOptions(argv, fromEventLogCommand);
  if (v === undefined) return 0;
  if (v.output === 'json' && v.yaml)
    throw new UsageError('--json and --yaml exclude each other (-o json prints the JSON envelope)');
  const { bank, pcrs } = v;
  const log = await replay(v['event-log'], bank);
  if (log.pcrs.size === 0)
    throw new UsageError(`${v['event-log']}: the log extends no PCR in the ${bank} bank`);
  const { measurements, unmeasured } = measurementsFromReplay(log, pcrs);
  const events = [...log.events.values()].reduce((n, l) => n + l.length, 0);
  process.stderr.write(
    `replayed ${events} events (${log.format}, ${bank}); PCRs extended: ${[...log.pcrs.keys()].join(',')}\n`,
  );
  for (const i of unmeasured)
    process.stderr.write(
      `warning: PCR ${i} has no events in the log; wrote its reset value, which holds only if nothing extends it after boot\n`,
    );
  const block = { measurements };
  return printResult(v.output, 'measurements from-event-log', 0, block, (b) =>
    v.yaml ? toYaml(b) : JSON.stringify(b, null, 2),
  );
}

/** The JSON printed by `measurements diff --json`. */
export interface DiffReport {
  bank: ReplayBank;
  match: boolean;
  pcrs: Array<{
    pcr: number;
    status: 'match' | 'mismatch' | 'warn-only-mismatch';
    expected: string;
    actual: string;
    measured: boolean;
    warnOnly: boolean;
    events?: Array<{ seq: number; type: string; digest: string; description: string }>;
  }>;
  /** PCRs the log extends that the config does not name. */
  notInConfig: number[];
}

function status(r: PcrDiff): DiffReport['pcrs'][number]['status'] {
  return r.match ? 'match' : r.warnOnly ? 'warn-only-mismatch' : 'mismatch';
}

function renderDiff(report: DiffReport): string {
  const lines: string[] = [];
  for (const r of report.pcrs) {
    const note = r.measured ? '' : ' (no events in the log: reset value)';
    if (r.status === 'match') {
      lines.push(`PCR ${r.pcr}: match${note}`, `  value    ${r.expected}`);
      continue;
    }
    lines.push(
      `PCR ${r.pcr}: ${r.status === 'mismatch' ? 'MISMATCH' : 'mismatch (warnOnly)'}${note}`,
      `  expected ${r.expected}`,
      `  actual   ${r.actual}`,
    );
    if (r.events && r.events.length > 0) {
      lines.push(`  events that extended PCR ${r.pcr} (${report.bank}), in order:`);
      for (const e of r.events) lines.push(`    #${e.seq} ${e.type} ${e.digest} ${e.description}`);
    }
  }
  if (report.notInConfig.length > 0)
    lines.push(`PCRs the log extends but the config does not name: ${report.notInConfig.join(',')}`);
  const bad = report.pcrs.filter((r) => r.status === 'mismatch').length;
  const warn = report.pcrs.filter((r) => r.status === 'warn-only-mismatch').length;
  lines.push(
    `summary: ${report.pcrs.length - bad - warn} match, ${bad} mismatch, ${warn} warnOnly mismatch (${report.bank})`,
  );
  return `${lines.join('\n')}\n`;
}

async function diff(argv: string[]): Promise<number> {
  const v = parseOptions(argv, diffCommand);
  if (v === undefined) return 0;
  const configPath = v.config;
  const text = (await readInput(configPath, 'attestation config')).toString('utf8');
  let expected: Measurements;
  try {
    expected = parseAttestationConfig(text).measurements;
  } catch (err) {
    if (!isConfbootError(err)) throw err;
    throw new UsageError(`${configPath}: ${err.message}`);
  }
  const size = [...expected.values()][0]?.expected.length;
  const bank = v.bank ?? (size === 48 ? 'sha384' : 'sha256');
  if (size !== REPLAY_BANKS[bank].size)
    throw new UsageError(
      `${configPath}: the measurements hold ${size}-byte values, the ${bank} bank has ${REPLAY_BANKS[bank].size}`,
    );
  const log = await replay(v['event-log'], bank);
  let rows: PcrDiff[];
  try {
    rows = diffMeasurementsAgainstLog(expected, log);
  } catch (err) {
    if (!isConfbootError(err)) throw err;
    throw new UsageError(`${configPath}: ${err.message}`);
  }
  const report: DiffReport = {
    bank,
    match: rows.every((r) => r.match || r.warnOnly),
    pcrs: rows.map((r) => ({
      pcr: r.pcr,
      status: status(r),
      expected: hex(r.expected),
      actual: hex(r.actual),
      measured: r.measured,
      warnOnly: r.warnOnly,
      ...(r.match
        ? {}
        : {
            events: r.events.map((e) => ({
              seq: e.seq,
              type: e.typeName,
              digest: hex(e.digest),
              description: e.description,
            })),
          }),
    })),
    notInConfig: [...log.pcrs.keys()].filter((i) => !expected.has(i)),
  };
  return printResult(v.output, 'measurements diff', report.match ? 0 : 1, report, renderDiff);
}

const VERBS: Record<string, Verb> = {
  'from-event-log': {
    summary: 'replay a reference node’s event log into an attestation-config measurements block',
    run: (argv) => runCommand(() => fromEventLog(argv)),
  },
  diff: {
    summary: 'compare an attestation config with a replayed event log, per PCR',
    run: (argv) => runCommand(() => diff(argv)),
  },
  'dry-run': {
    summary: "replay the join service's recorded evidence against a new attestation config",
    run: async (argv) => runCommand(async () => (await import('./measurements-dry-run.js')).runDryRun(argv)),
  },
};

export function run(argv: string[]): Promise<number> {
  return runVerb('measurements', VERBS, argv);
}

/** Every verb's option table (loads the dry-run verb's module). */
export async function loadCommandSpecs(): Promise<readonly CommandSpec[]> {
  const { dryRunCommand } = await import('./measurements-dry-run.js');
  return [fromEventLogCommand, diffCommand, dryRunCommand];
}
