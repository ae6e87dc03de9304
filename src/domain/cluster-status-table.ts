/**
 * `confboot status` as text for people: the node table, the join service per control plane, the
 * attestation config's sets and each out-of-policy node's problems. Every line fits
 * {@link STATUS_TABLE_WIDTH} columns: each column has a width cap and longer values are cut with `…`.
 */
import type { ClusterStatus, NodeStatus } from './cluster-status.js';

/** The widest line the table prints (a 120-column terminal). */
export const STATUS_TABLE_WIDTH = 120;

/** `value` cut to `max` characters (the last one `…` when cut). */
function cut(value: string, max: number): string {
  return value.length <= max ? value : `${value.slice(0, Math.max(0, max - 1))}…`;
}

/** `seconds` as a short age: `42s`, `5m`, `3h`, `12d`. */
export function shortAge(seconds: number): string {
  if (seconds < 60) return `${seconds}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)}h`;
  return `${Math.floor(seconds / 86_400)}d`;
}

/** One column: its header, its width cap and how a node fills it. */
interface Column {
  header: string;
  max: number;
  value: (n: NodeStatus, now: Date) => string;
}

const ageSince = (at: string | undefined, now: Date) =>
  at === undefined ? '' : ` ${shortAge(Math.max(0, Math.floor((now.getTime() - Date.parse(at)) / 1000)))}`;

const COLUMNS: readonly Column[] = [
  { header: 'NODE', max: 18, value: (n) => n.name },
  { header: 'ROLE', max: 6, value: (n) => (n.role === 'control-plane' ? 'cp' : 'worker') },
  { header: 'VARIANT', max: 11, value: (n) => n.variant ?? '-' },
  { header: 'SET', max: 10, value: (n) => n.measurementSet ?? (n.variant === undefined ? '-' : 'unknown') },
  {
    header: 'LAST DECISION',
    max: 20,
    value: (n, now) =>
      n.lastDecision === undefined
        ? 'none'
        : n.lastDecision.outcome === 'issued'
          ? `issued${ageSince(n.lastDecision.at, now)}`
          : n.lastDecision.outcome === 'init'
            ? 'init'
            : `refused${ageSince(n.lastDecision.at, now)} ${n.lastDecision.reason}`,
  },
  {
    header: 'RECEIPT',
    max: 14,
    value: (n) => (n.receipt === undefined ? '-' : `${n.receipt.kid.slice(0, 4)} ${n.receipt.status}`),
  },
  {
    header: 'DISK',
    max: 8,
    value: (n) => (n.disks.length === 0 ? '-' : `${n.disks[0]?.slice(0, 8)}${n.disks.length > 1 ? '+' : ''}`),
  },
  {
    header: 'AGE',
    max: 4,
    value: (n) => (n.evidenceAgeSeconds === undefined ? '-' : shortAge(n.evidenceAgeSeconds)),
  },
  {
    header: 'REATT',
    max: 5,
    value: (n) => (n.reattestation === 'none' ? 'none' : n.reattestation.ok ? 'ok' : 'FAIL'),
  },
  { header: 'POLICY', max: 6, value: (n) => (n.inPolicy ? 'ok' : 'OUT') },
];

/** Rows of cells aligned in columns two spaces apart, each cell cut to its cap. */
function aligned(rows: readonly string[][], caps: readonly number[]): string[] {
  const cells = rows.map((r) => r.map((c, i) => cut(c, caps[i] ?? STATUS_TABLE_WIDTH)));
  const widths = caps.map((_, i) => Math.max(...cells.map((r) => r[i]?.length ?? 0)));
  return cells.map((r) =>
    cut(
      r
        .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
        .join('  ')
        .trimEnd(),
      STATUS_TABLE_WIDTH,
    ),
  );
}

/** The status as text (see the module header). */
export function statusTable(status: ClusterStatus): string {
  const now = new Date(status.at);
  const lines: string[] = [];
  const v = status.nodeVersion;
  if (v !== undefined)
    lines.push(
      cut(
        `Image ${v.imageVersion ?? v.imageReference ?? 'unknown'}, Kubernetes ${v.kubernetesClusterVersion ?? 'unknown'}`,
        STATUS_TABLE_WIDTH,
      ),
    );
  lines.push(
    ...aligned(
      [COLUMNS.map((c) => c.header), ...status.nodes.map((n) => COLUMNS.map((c) => c.value(n, now)))],
      COLUMNS.map((c) => c.max),
    ),
  );
  lines.push('', 'Join service:');
  if (status.joinService.length === 0) lines.push('  no control plane');
  for (const j of status.joinService)
    lines.push(
      cut(
        `  ${j.node}: ${j.ready ? 'Ready' : 'NOT READY'}${j.pod ? ` (${j.pod})` : ' (no pod)'}`,
        STATUS_TABLE_WIDTH,
      ),
    );
  lines.push('Attestation config:');
  const config = status.attestationConfig;
  if ('error' in config) lines.push(cut(`  unreadable: ${config.error}`, STATUS_TABLE_WIDTH));
  else
    for (const s of config.sets)
      lines.push(
        cut(
          `  ${s.name}: ${s.validNow ? 'valid' : 'NOT VALID'} now (from ${s.notBefore ?? 'always'} until ${s.expires ?? 'never'})`,
          STATUS_TABLE_WIDTH,
        ),
      );
  const out = status.nodes.filter((n) => !n.inPolicy);
  if (out.length > 0 || status.problems.length > 0) {
    lines.push('Out of policy:');
    if (status.problems.length > 0)
      lines.push(cut(`  cluster: ${status.problems.join(', ')}`, STATUS_TABLE_WIDTH));
    for (const n of out) {
      const why = n.problems.map((p) =>
        p === 'refused'
          ? `refused (${cut(n.lastDecision?.reason ?? '', 24)})`
          : p === 'reattestation-failed' && n.reattestation !== 'none'
            ? `reattestation-failed (${n.reattestation.reason})`
            : p,
      );
      lines.push(cut(`  ${cut(n.name, 36)}: ${why.join(', ')}`, STATUS_TABLE_WIDTH));
    }
  } else lines.push('Every node is in policy.');
  return `${lines.join('\n')}\n`;
}
