/**
 * `confboot status` (domain): one row per node of a running cluster, the join service's readiness
 * per control plane and the attestation config in force, all computed from a snapshot of what the
 * cluster records (ports/cluster-status.ts), and which nodes are out of policy.
 *
 * A node's records are the join service's decisions attributed to it: issued tickets that name it
 * or whose disk is bound to it, and refusals (EvidenceRecords and Events) that name it and came
 * from one of its own addresses. A refusal naming a node from another address is someone else's
 * claim and is not held against the node. The oldest control plane with no join record is the one
 * `confboot init` set up: it never asked the join service, so it needs no evidence or binding.
 *
 * A node is out of policy when its last decision was a refusal, when it has no issued ticket on
 * record, when the measurement set its last ticket matched is no longer in the config or no longer
 * valid, when that evidence is older than the allowed age, when no state disk is bound to it, or
 * when the node operator's last re-attestation of it (after that ticket) failed.
 * The cluster is out of policy when any node is, when the join service is not Ready on a control
 * plane, or when the attestation config cannot be read.
 */
import type {
  ClusterSnapshot,
  StatusEvidence,
  StatusNode,
  StatusNodeVersion,
  StatusRefusalEvent,
} from '../ports/cluster-status.js';
import { foldNodeName } from '../ports/kubernetes-node.js';
import { peerHost } from '../ports/peer-address.js';
import type { ReattestationResult } from '../ports/reattestation.js';
import { isSetValidAt, parseAttestationConfig } from './measurements.js';

/** Why a node or the cluster is out of policy. */
export type StatusProblem =
  | 'refused'
  | 'no-evidence'
  | 'measurement-set-expired'
  | 'measurement-set-retired'
  | 'evidence-too-old'
  | 'no-disk-binding'
  | 'reattestation-failed'
  | 'join-service-not-ready'
  | 'attestation-config-unreadable';

/** The last decision on a node. */
export interface StatusDecision {
  outcome: 'issued' | 'refused' | 'init';
  /** `ok`, the refusal's reason (failed check or reason code), or `init` for the first control plane. */
  reason: string;
  /** ISO 8601; undefined for the init node (no decision recorded). */
  at: string | undefined;
  /** Where it is recorded. */
  source: 'evidence' | 'event' | 'none';
}

/** One node's row. */
export interface NodeStatus {
  name: string;
  role: 'control-plane' | 'worker';
  ready: boolean | undefined;
  /** The attestation variant of its last issued ticket. */
  variant: string | undefined;
  /** The measurement set its last issued ticket matched; `default` for an unnamed set. */
  measurementSet: string | undefined;
  lastDecision: StatusDecision | undefined;
  receipt: { kid: string; status: string } | undefined;
  /** State disks bound to it (lower-case UUIDs). */
  disks: string[];
  /** When its last issued ticket's evidence was decided on, and how old that is in seconds. */
  evidenceAt: string | undefined;
  evidenceAgeSeconds: number | undefined;
  /**
   * The node operator's last re-attestation of the node since its last issued ticket (its
   * EvidenceRecord's); `none` when it has not been re-attested since.
   */
  reattestation: 'none' | ReattestationResult;
  inPolicy: boolean;
  problems: StatusProblem[];
}

/** The join service on one control plane. */
export interface JoinServiceStatus {
  node: string;
  pod: string | undefined;
  ready: boolean;
}

/** One measurement set of the config in force. */
export interface MeasurementSetStatus {
  name: string;
  notBefore: string | undefined;
  expires: string | undefined;
  validNow: boolean;
}

/** The whole status. */
export interface ClusterStatus {
  at: string;
  nodeVersion: StatusNodeVersion | undefined;
  nodes: NodeStatus[];
  joinService: JoinServiceStatus[];
  attestationConfig: { sets: MeasurementSetStatus[] } | { error: string };
  /** Problems of the cluster as a whole (join service, config). */
  problems: StatusProblem[];
  inPolicy: boolean;
}

/** What status is judged against. */
export interface StatusPolicy {
  now: Date;
  /** Evidence older than this puts its node out of policy. */
  maxEvidenceAgeMs: number;
}

/** The name of an unnamed measurement set (a plain `measurements` config), as receipts name it. */
const UNNAMED_SET = 'default';

const latest = <T extends { at: string | undefined }>(items: readonly T[]): T | undefined =>
  items.reduce<T | undefined>(
    (best, x) => (best === undefined || Date.parse(x.at ?? '') > Date.parse(best.at ?? '') ? x : best),
    undefined,
  );

/** Whether the config is one unnamed set (records of its decisions name no set). */
const unnamedOnly = (config: ClusterStatus['attestationConfig']) =>
  'sets' in config && config.sets.length === 1 && config.sets[0]?.name === UNNAMED_SET;

/** The config's sets, or why it cannot be read. */
function configSets(text: string | undefined, now: Date): ClusterStatus['attestationConfig'] {
  if (text === undefined) return { error: 'ConfigMap kube-system/join-config has no attestationConfig' };
  try {
    const parsed = parseAttestationConfig(text);
    return {
      sets: parsed.sets.map((s) => ({
        name: s.name ?? UNNAMED_SET,
        notBefore: s.notBefore?.toISOString(),
        expires: s.expires?.toISOString(),
        validNow: isSetValidAt(s, now),
      })),
    };
  } catch (err) {
    return { error: (err as Error).message };
  }
}

/** The node's records: see the module header. */
function recordsOf(
  node: StatusNode,
  snapshot: ClusterSnapshot,
): { issued: StatusEvidence[]; refused: StatusEvidence[]; events: StatusRefusalEvent[]; disks: string[] } {
  const name = foldNodeName(node.name);
  const disks = snapshot.diskBindings.filter((b) => foldNodeName(b.nodeName) === name).map((b) => b.diskUuid);
  const bound = new Set(disks.map((d) => `disk/${d.toLowerCase()}`));
  const own = (host: string | undefined) => host !== undefined && node.addresses.includes(host);
  const named = (n: string | undefined) => n !== undefined && foldNodeName(n) === name;
  const issued = snapshot.evidence.filter(
    (r) => r.outcome === 'issued' && (named(r.nodeName) || bound.has(r.key.toLowerCase())),
  );
  const refused = snapshot.evidence.filter(
    (r) => r.outcome === 'refused' && named(r.nodeName) && own(peerHost(r.peer)),
  );
  const events = snapshot.refusals.filter((e) => named(e.nodeName) && own(e.host));
  return { issued, refused, events, disks };
}

/** The row of one node; `initNode` is the name of the control plane `init` set up, if any. */
function nodeStatus(
  node: StatusNode,
  snapshot: ClusterSnapshot,
  config: ClusterStatus['attestationConfig'],
  policy: StatusPolicy,
  initNode: string | undefined,
): NodeStatus {
  const { issued, refused, events, disks } = recordsOf(node, snapshot);
  const isInit = node.name === initNode;
  const lastIssued = latest(issued);
  const decisions: StatusDecision[] = [
    ...[...issued, ...refused].map(
      (r): StatusDecision => ({ outcome: r.outcome, reason: r.reason, at: r.at, source: 'evidence' }),
    ),
    ...events.map(
      (e): StatusDecision => ({ outcome: 'refused', reason: e.reason, at: e.at, source: 'event' }),
    ),
  ];
  const lastDecision: StatusDecision | undefined =
    latest(decisions) ??
    (isInit ? { outcome: 'init', reason: 'init', at: undefined, source: 'none' } : undefined);
  const problems: StatusProblem[] = [];
  if (lastDecision?.outcome === 'refused') problems.push('refused');
  const measurementSet =
    lastIssued === undefined
      ? undefined
      : (lastIssued.measurementSet ?? (unnamedOnly(config) ? UNNAMED_SET : undefined));
  let ageSeconds: number | undefined;
  if (lastIssued === undefined) {
    if (!isInit) problems.push('no-evidence');
  } else {
    const ageMs = policy.now.getTime() - Date.parse(lastIssued.at);
    ageSeconds = Math.max(0, Math.floor(ageMs / 1000));
    if (!(ageMs <= policy.maxEvidenceAgeMs)) problems.push('evidence-too-old');
    if (measurementSet !== undefined && 'sets' in config) {
      const set = config.sets.find((s) => s.name === measurementSet);
      if (set === undefined) problems.push('measurement-set-retired');
      else if (!set.validNow) problems.push('measurement-set-expired');
    }
  }
  if (disks.length === 0 && !isInit) problems.push('no-disk-binding');
  // A re-attestation from before the last ticket (a rejoin since) no longer speaks for the node.
  const reattested = lastIssued?.lastReattestation;
  const reattestation =
    reattested !== undefined &&
    lastIssued !== undefined &&
    Date.parse(reattested.at) >= Date.parse(lastIssued.at)
      ? reattested
      : 'none';
  if (reattestation !== 'none' && !reattestation.ok) problems.push('reattestation-failed');
  return {
    name: node.name,
    role: node.controlPlane ? 'control-plane' : 'worker',
    ready: node.ready,
    variant: lastIssued?.variant,
    measurementSet,
    lastDecision,
    receipt:
      lastIssued?.receiptKid !== undefined
        ? { kid: lastIssued.receiptKid, status: lastIssued.receiptStatus ?? 'unknown' }
        : undefined,
    disks: [...disks].sort(),
    evidenceAt: lastIssued?.at,
    evidenceAgeSeconds: ageSeconds,
    reattestation,
    inPolicy: problems.length === 0,
    problems,
  };
}

/** The control plane `init` set up: the oldest control plane that no join record names. */
function initNodeOf(snapshot: ClusterSnapshot): string | undefined {
  const planes = snapshot.nodes
    .filter((n) => n.controlPlane && n.createdAt !== undefined)
    .sort((a, b) => Date.parse(a.createdAt ?? '') - Date.parse(b.createdAt ?? ''));
  const oldest = planes[0];
  if (oldest === undefined) return undefined;
  const r = recordsOf(oldest, snapshot);
  return r.issued.length + r.refused.length + r.events.length + r.disks.length === 0
    ? oldest.name
    : undefined;
}

/** Computes the status of the cluster in `snapshot` under `policy` (see the module header). */
export function clusterStatus(snapshot: ClusterSnapshot, policy: StatusPolicy): ClusterStatus {
  const config = configSets(snapshot.attestationConfig, policy.now);
  const initNode = initNodeOf(snapshot);
  const nodes = [...snapshot.nodes]
    .sort((a, b) => Number(b.controlPlane) - Number(a.controlPlane) || a.name.localeCompare(b.name))
    .map((n) => nodeStatus(n, snapshot, config, policy, initNode));
  const joinService = snapshot.nodes
    .filter((n) => n.controlPlane)
    .sort((a, b) => a.name.localeCompare(b.name))
    .map((n): JoinServiceStatus => {
      const pods = snapshot.joinServicePods.filter((p) => p.nodeName === n.name);
      const pod = pods.find((p) => p.ready) ?? pods[0];
      return { node: n.name, pod: pod?.name, ready: pod?.ready === true };
    });
  const problems: StatusProblem[] = [];
  if (joinService.length === 0 || joinService.some((j) => !j.ready)) problems.push('join-service-not-ready');
  if ('error' in config) problems.push('attestation-config-unreadable');
  return {
    at: policy.now.toISOString(),
    nodeVersion: snapshot.nodeVersion,
    nodes,
    joinService,
    attestationConfig: config,
    problems,
    inPolicy: problems.length === 0 && nodes.every((n) => n.inPolicy),
  };
}
