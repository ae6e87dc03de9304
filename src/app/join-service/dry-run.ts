/**
 * Dry run of an attestation config against recorded joins (join service and `confboot measurements
 * dry-run`): every recorded node's evidence (the document and the TLS-exporter nonce it bound, as the
 * join service verified it) is validated again by a validator built from the new config, so an
 * operator sees who a new policy would refuse before any node reboots into it. The prediction is
 * the attestation verdict alone; other reasons a request was refused (deny list, disk binding) are
 * shown as recorded. Freshness and channel binding are as recorded: the replay checks the document
 * against the nonce and TLS key of the session it came from.
 */
import type { JoinServiceMetrics } from '../../adapters/ops/metrics.js';
import { isAttestationError, messageOf } from '../../ports/errors.js';
import type { EvidenceRecord, EvidenceStore } from '../../ports/evidence-store.js';
import type { Logger } from '../../ports/logger.js';
import { callerIp } from '../../ports/peer-address.js';
import type { Validator } from '../../ports/validator.js';

/** The prediction for one recorded node. */
export interface DryRunNodeResult {
  key: string;
  nodeName?: string;
  peer: string;
  variant: string;
  /** The recorded decision. */
  recorded: { rpc: string; outcome: 'issued' | 'refused'; reason: string; at: string };
  /** Whether the node's last ticket was issued (it counts as joined). */
  joined: boolean;
  /** What the new config would do with the recorded evidence. */
  predicted: 'accepted' | 'refused';
  /** `ok` (with warnOnly mismatches named), or the failed check and its message. */
  why: string;
}

/** The dry run of one config against every record. */
export interface DryRunReport {
  nodes: DryRunNodeResult[];
  /** Keys of joined nodes the new config would refuse. */
  wouldRefuseJoined: string[];
}

const equal = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);

/** Replays one record against `validator`. */
async function replay(
  record: EvidenceRecord,
  validator: Validator | undefined,
): Promise<Pick<DryRunNodeResult, 'predicted' | 'why'>> {
  if (validator === undefined)
    return { predicted: 'refused', why: `no validator for variant ${record.variant} in the new config` };
  try {
    const ip = callerIp(record.peer);
    const result = await validator.validate(
      record.document,
      record.nonce,
      ip !== undefined ? { peerAddress: ip } : {},
    );
    if (record.userData !== undefined && !equal(result.userData, record.userData))
      return { predicted: 'refused', why: 'user-data: the document binds another TLS key than recorded' };
    const warn = result.warnings.map((w) => `PCR${w.index}`).join(', ');
    return { predicted: 'accepted', why: warn === '' ? 'ok' : `ok (warnOnly mismatch: ${warn})` };
  } catch (err) {
    return {
      predicted: 'refused',
      why: isAttestationError(err) ? `${err.check}: ${err.message}` : `validator: ${messageOf(err)}`,
    };
  }
}

/**
 * Replays every record against the validator `validatorFor` returns for its variant (undefined:
 * the new config has none, the node would be refused).
 */
export async function dryRun(
  records: readonly EvidenceRecord[],
  validatorFor: (variant: string) => Validator | undefined,
): Promise<DryRunReport> {
  const nodes: DryRunNodeResult[] = [];
  for (const r of records) {
    const verdict = await replay(r, validatorFor(r.variant));
    nodes.push({
      key: r.key,
      ...(r.nodeName !== undefined ? { nodeName: r.nodeName } : {}),
      peer: r.peer,
      variant: r.variant,
      recorded: { rpc: r.rpc, outcome: r.outcome, reason: r.reason, at: r.at },
      joined: r.outcome === 'issued',
      ...verdict,
    });
  }
  return {
    nodes,
    wouldRefuseJoined: nodes.filter((n) => n.joined && n.predicted === 'refused').map((n) => n.key),
  };
}

/** One line per node: who, recorded outcome, prediction and why. */
export function renderDryRun(report: DryRunReport): string {
  const lines = report.nodes.map(
    (n) =>
      `${n.nodeName ?? n.key} (${n.key}, ${n.variant}): recorded ${n.recorded.outcome}${n.recorded.outcome === 'refused' ? ` (${n.recorded.reason})` : ''} at ${n.recorded.at}; new config: ${n.predicted.toUpperCase()} ${n.why}`,
  );
  lines.push(
    report.wouldRefuseJoined.length === 0
      ? `summary: ${report.nodes.length} recorded, no joined node would be refused`
      : `summary: ${report.nodes.length} recorded, ${report.wouldRefuseJoined.length} joined node(s) would be REFUSED: ${report.wouldRefuseJoined.join(', ')}`,
  );
  return `${lines.join('\n')}\n`;
}

/** Where the join service's on-load dry run reports. */
export interface LoadCheckOptions {
  store: EvidenceStore;
  metrics: Pick<JoinServiceMetrics, 'configDryRuns' | 'configDryRunRefusedJoined'>;
  logger: Logger;
  /** Called with every report (tests wait on it). */
  onReport?: (report: DryRunReport) => void;
}

/**
 * Wraps a validator builder so that every config it builds (at start and on each reload) is dry-run
 * against the recorded evidence of its variant, in the background: the result is logged (a warning
 * naming each joined node the config would refuse) and counted in /metrics. The validator is
 * returned at once; the check never delays or blocks a reload.
 */
export function withDryRunOnLoad(
  build: (config: Uint8Array) => Validator | Promise<Validator>,
  options: LoadCheckOptions,
): (config: Uint8Array) => Promise<Validator> {
  return async (config) => {
    const validator = await build(config);
    void checkLoadedConfig(validator, options);
    return validator;
  };
}

/** Dry-runs `validator` against the store's records of its variant; logs and counts the result. */
export async function checkLoadedConfig(validator: Validator, options: LoadCheckOptions): Promise<void> {
  const { store, metrics, logger } = options;
  try {
    const records = (await store.list()).filter((r) => r.variant === validator.variant);
    const report = await dryRun(records, (v) => (v === validator.variant ? validator : undefined));
    metrics.configDryRunRefusedJoined.set(report.wouldRefuseJoined.length);
    if (report.wouldRefuseJoined.length > 0) {
      metrics.configDryRuns.inc({ result: 'would-refuse-joined' });
      logger.warn('Loaded attestation config would refuse joined nodes on their recorded evidence', {
        variant: validator.variant,
        recorded: report.nodes.length,
        refused: report.nodes
          .filter((n) => n.joined && n.predicted === 'refused')
          .map((n) => ({ key: n.key, nodeName: n.nodeName, why: n.why })),
      });
    } else {
      metrics.configDryRuns.inc({ result: 'ok' });
      logger.info('Loaded attestation config accepts every joined node on its recorded evidence', {
        variant: validator.variant,
        recorded: report.nodes.length,
      });
    }
    options.onReport?.(report);
  } catch (err) {
    metrics.configDryRuns.inc({ result: 'error' });
    logger.warn('Dry run of the loaded attestation config failed', { error: messageOf(err) });
  }
}
