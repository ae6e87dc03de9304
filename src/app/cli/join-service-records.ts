/**
 * `confboot join-service`: the flags of what the service keeps and reports (join receipts, the
 * evidence record, refusal Events) and the whole-number flag parsers the command shares.
 */
import { ReceiptKey } from '../../adapters/receipts/receipt-key.js';
import type { ProductionJoinServiceConfig } from '../join-service/production.js';
import type { OptionSpec } from './args.js';
import { UsageError } from './args.js';

/** The flags' specs (part of `confboot join-service`'s options). */
export const RECORD_OPTIONS: Record<string, OptionSpec> = {
  'receipt-key': {
    type: 'string',
    valueName: 'F',
    secret: 'file',
    description:
      'PKCS#8 PEM ECDSA P-256 key that signs join receipts (the same Secret on every replica); its JWKS is served at /.well-known/jwks.json. Without it tickets carry no receipt',
  },
  'receipt-retired-jwks': {
    type: 'string',
    valueName: 'F',
    description: 'JWKS of retired receipt keys, still published next to --receipt-key during a rotation',
  },
  'state-dir': {
    type: 'string',
    valueName: 'DIR',
    description:
      'directory of the evidence record (evidence.jsonl): the evidence behind each decision, replayed by `confboot measurements dry-run` and against every loaded attestation config. Without it nothing is recorded',
  },
  'evidence-store': {
    type: 'string',
    valueName: 'file|cluster',
    description:
      'where the evidence record lives: `cluster` = EvidenceRecord resources through the Kubernetes API, shared by every replica and kept across restarts; `file` = evidence.jsonl under --state-dir (one process). Default: file with --state-dir, else none',
  },
  'refusal-events': {
    type: 'string',
    valueName: 'on|off',
    default: 'on',
    description:
      'record each refusal as a Kubernetes Event in kube-system on DaemonSet join-service (deduplicated per caller and reason, rate-limited)',
  },
  'evidence-retention': {
    type: 'string',
    valueName: 'N',
    default: '1000',
    description: 'nodes whose latest evidence is kept (plus 100 handshake refusals by address)',
  },
  'evidence-max-age-days': {
    type: 'string',
    valueName: 'D',
    default: '90',
    description: 'evidence older than this is dropped',
  },
};

/** A whole number ≥ 0 of `--flag`. */
export function parseCount(flag: string, value: string): number {
  if (!/^\d+$/.test(value)) throw new UsageError(`--${flag}: want a whole number ≥ 0, got "${value}"`);
  return Number(value);
}

/** A whole number ≥ 1 of `--flag`. */
export function parsePositive(flag: string, value: string): number {
  const n = parseCount(flag, value);
  if (n < 1) throw new UsageError(`--${flag}: want a whole number ≥ 1, got "${value}"`);
  return n;
}

function parseOnOff(flag: string, value: string): boolean {
  if (value !== 'on' && value !== 'off') throw new UsageError(`--${flag}: want on or off, got "${value}"`);
  return value === 'on';
}

/** `--evidence-store`: `file` needs `--state-dir`; without the flag, `file` when a state directory is given. */
function parseEvidenceStore(
  value: string | undefined,
  stateDir: string | undefined,
): 'file' | 'cluster' | undefined {
  if (value === undefined) return stateDir === undefined ? undefined : 'file';
  if (value !== 'file' && value !== 'cluster')
    throw new UsageError(`--evidence-store: want file or cluster, got "${value}"`);
  if (value === 'file' && stateDir === undefined)
    throw new UsageError('--evidence-store=file needs --state-dir');
  return value;
}

/** The record flags, checked and typed. */
export interface RecordFlags {
  /** `--receipt-key` and `--receipt-retired-jwks`. */
  receiptKeyPath: string | undefined;
  receiptRetiredJwksPath: string | undefined;
  /** `--state-dir`, `--evidence-store`, `--evidence-retention`, `--evidence-max-age-days`. */
  stateDir: string | undefined;
  evidenceStore: 'file' | 'cluster' | undefined;
  /** `--refusal-events`. */
  refusalEvents: boolean;
  evidenceMaxRecords: number;
  evidenceMaxAgeMs: number;
}

/** Parses the record flags from the command's parsed values (`str` reads one). */
export function parseRecordFlags(str: (flag: string) => string | undefined): RecordFlags {
  return {
    receiptKeyPath: str('receipt-key'),
    receiptRetiredJwksPath: str('receipt-retired-jwks'),
    stateDir: str('state-dir'),
    evidenceStore: parseEvidenceStore(str('evidence-store'), str('state-dir')),
    refusalEvents: parseOnOff('refusal-events', str('refusal-events') as string),
    evidenceMaxRecords: parsePositive('evidence-retention', str('evidence-retention') as string),
    evidenceMaxAgeMs:
      parsePositive('evidence-max-age-days', str('evidence-max-age-days') as string) * 24 * 3600 * 1000,
  };
}

/** The production config of the record flags (loads the receipt key). */
export async function recordConfig(
  flags: RecordFlags,
): Promise<
  Pick<
    ProductionJoinServiceConfig,
    'evidenceStore' | 'stateDir' | 'evidenceRetention' | 'refusalEvents' | 'receiptKey'
  >
> {
  return {
    ...(flags.evidenceStore !== undefined
      ? {
          evidenceStore: flags.evidenceStore,
          ...(flags.stateDir !== undefined ? { stateDir: flags.stateDir } : {}),
          evidenceRetention: { maxRecords: flags.evidenceMaxRecords, maxAgeMs: flags.evidenceMaxAgeMs },
        }
      : {}),
    refusalEvents: flags.refusalEvents,
    ...(flags.receiptKeyPath !== undefined
      ? {
          receiptKey: await ReceiptKey.load(flags.receiptKeyPath, {
            ...(flags.receiptRetiredJwksPath !== undefined
              ? { retiredJwksPath: flags.receiptRetiredJwksPath }
              : {}),
          }),
        }
      : {}),
  };
}
