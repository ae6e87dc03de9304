/**
 * The node operator's reconcile round: the cluster-side end of a join. After the join service
 * issued a ticket (a JoiningNode record, a DiskBinding) the node's kubelet asks for its client
 * certificate through the CSR API, registers its Node and becomes Ready. One round:
 *
 * 1. decides every pending kubelet client CSR (kubelet-csr-approval.ts) against the JoiningNode
 *    records as they are before this round removes any;
 * 2. removes a JoiningNode once a Ready Node of its name exists, or once its deadline passed
 *    (a control plane's record is what lets the next control plane join). A Ready Node counts only
 *    when its kubelet posted Ready after the record was created: a node wiped and joining again
 *    under its old name finds its old Node still Ready for the node-monitor grace period, and
 *    removing the record then would deny the new kubelet's CSR;
 * 3. labels DiskBindings written before the owner label existed (a migration each record goes
 *    through once), and releases a DiskBinding whose node is gone: no Node and no JoiningNode names
 *    it and the record is older than the grace period (a ticket being issued writes the binding a
 *    moment before its JoiningNode).
 *
 * A failed read stops the round (nothing is decided on partial facts); a failed write is reported
 * and the round goes on. Rounds are idempotent: the next one finds what is still to do.
 */
import type { Clock } from '../ports/clock.js';
import type { ClusterNode, ClusterNodes } from '../ports/cluster-nodes.js';
import type { DiskBindingRecords } from '../ports/disk-binding-records.js';
import { messageOf } from '../ports/errors.js';
import type { JoiningNodes } from '../ports/joining-nodes.js';
import type { KubeletCsrs } from '../ports/kubelet-csrs.js';
import type { Logger } from '../ports/logger.js';
import type { CallOptions } from '../ports/types.js';
import { judgeKubeletCsr } from './kubelet-csr-approval.js';

/**
 * Whether `node` is Ready for a JoiningNode created at `createdAt`: Ready, and, when both times are
 * known, posted Ready at or after the record's creation (both have whole-second precision in the
 * API; a node takes far longer than a second from its ticket to its kubelet's first status).
 */
function readySince(node: ClusterNode | undefined, createdAt: Date | undefined): boolean {
  if (node?.ready !== true) return false;
  if (node.readyHeartbeat === undefined || createdAt === undefined) return true;
  return node.readyHeartbeat.getTime() >= createdAt.getTime();
}

/** Default age below which a DiskBinding is never released (longer than issuing one ticket takes). */
export const DEFAULT_BINDING_GRACE_MS = 10 * 60_000;

/** What the operator needs. */
export interface NodeOperatorDeps {
  joiningNodes: JoiningNodes;
  nodes: Pick<ClusterNodes, 'list'>;
  diskBindings: DiskBindingRecords;
  /** The CSR approver's API; without it CSRs are not looked at. */
  csrs?: KubeletCsrs;
  clock: Pick<Clock, 'now' | 'sleep'>;
  logger: Logger;
  /** See {@link DEFAULT_BINDING_GRACE_MS}. */
  bindingGraceMs?: number;
}

/** What one round did. */
export interface RoundReport {
  approved: Array<{ csr: string; nodeName: string }>;
  denied: Array<{ csr: string; reason: string; message: string }>;
  deletedJoiningNodes: Array<{ objectName: string; nodeName: string; why: 'node-ready' | 'deadline' }>;
  labelledBindings: string[];
  releasedBindings: Array<{ name: string; nodeName: string }>;
  /** Writes that failed ("doing x: cause"); the next round tries again. */
  failures: string[];
}

/** See the module header. */
export class NodeOperator {
  readonly #deps: NodeOperatorDeps;

  constructor(deps: NodeOperatorDeps) {
    this.#deps = deps;
  }

  /** One round. Rejects only when the facts cannot be read (nothing was changed then). */
  async reconcile(options: CallOptions = {}): Promise<RoundReport> {
    const { joiningNodes, nodes, diskBindings, csrs, clock } = this.#deps;
    const [joining, nodeList, bindings, pending] = await Promise.all([
      joiningNodes.list(options),
      nodes.list(options),
      diskBindings.list(options),
      csrs ? csrs.listPending(options) : Promise.resolve([]),
    ]);
    const now = clock.now();
    const report: RoundReport = {
      approved: [],
      denied: [],
      deletedJoiningNodes: [],
      labelledBindings: [],
      releasedBindings: [],
      failures: [],
    };
    const attempt = async (what: string, fn: () => Promise<void>): Promise<boolean> => {
      try {
        await fn();
        return true;
      } catch (err) {
        report.failures.push(`${what}: ${messageOf(err)}`);
        return false;
      }
    };
    for (const csr of pending) {
      const verdict = judgeKubeletCsr(csr, joining, now);
      if (verdict.decision === 'approve') {
        if (
          await attempt(`approving CSR ${csr.name}`, () =>
            csrs!.approve(csr.name, verdict.reason, verdict.message, options),
          )
        )
          report.approved.push({ csr: csr.name, nodeName: verdict.nodeName });
      } else if (verdict.decision === 'deny') {
        if (
          await attempt(`denying CSR ${csr.name}`, () =>
            csrs!.deny(csr.name, verdict.reason, verdict.message, options),
          )
        )
          report.denied.push({ csr: csr.name, reason: verdict.reason, message: verdict.message });
      }
    }
    const ready = new Map(nodeList.filter((n) => n.ready).map((n) => [n.name, n]));
    const known = new Set(nodeList.map((n) => n.name));
    const stillJoining = new Set<string>();
    for (const j of joining) {
      const why = readySince(ready.get(j.nodeName), j.createdAt)
        ? 'node-ready'
        : j.deadline.getTime() <= now.getTime()
          ? 'deadline'
          : undefined;
      if (why === undefined) {
        stillJoining.add(j.nodeName);
        continue;
      }
      if (
        await attempt(`deleting JoiningNode ${j.objectName}`, () =>
          joiningNodes.delete(j.objectName, options),
        )
      )
        report.deletedJoiningNodes.push({ objectName: j.objectName, nodeName: j.nodeName, why });
      else stillJoining.add(j.nodeName);
    }
    const grace = this.#deps.bindingGraceMs ?? DEFAULT_BINDING_GRACE_MS;
    for (const b of bindings) {
      if (
        !known.has(b.nodeName) &&
        !stillJoining.has(b.nodeName) &&
        now.getTime() - b.createdAt.getTime() >= grace
      ) {
        if (await attempt(`releasing DiskBinding ${b.name}`, () => diskBindings.release(b.name, options)))
          report.releasedBindings.push({ name: b.name, nodeName: b.nodeName });
        continue;
      }
      if (
        !b.labelled &&
        (await attempt(`labelling DiskBinding ${b.name}`, () => diskBindings.label(b.name, b.owner, options)))
      )
        report.labelledBindings.push(b.name);
    }
    this.#log(report);
    return report;
  }

  /**
   * Runs a round every `intervalMs` until `signal` aborts; a round that cannot read the cluster is
   * logged and the next one tries again. `onRound` sees each round's report.
   */
  async run(options: {
    intervalMs: number;
    signal: AbortSignal;
    onRound?: (r: RoundReport) => void;
  }): Promise<void> {
    const { clock, logger } = this.#deps;
    while (!options.signal.aborted) {
      try {
        options.onRound?.(await this.reconcile({ signal: options.signal }));
      } catch (err) {
        if (options.signal.aborted) break;
        logger.warn('Could not read the cluster, trying again', { err: messageOf(err) });
      }
      try {
        await clock.sleep(options.intervalMs, options.signal);
      } catch {
        break;
      }
    }
  }

  #log(r: RoundReport): void {
    const { logger } = this.#deps;
    for (const a of r.approved) logger.info('Approved kubelet client CSR', a);
    for (const d of r.denied) logger.warn('Denied kubelet client CSR', d);
    for (const j of r.deletedJoiningNodes) logger.info('Deleted JoiningNode', j);
    for (const b of r.labelledBindings) logger.info('Labelled DiskBinding with its owner', { name: b });
    for (const b of r.releasedBindings) logger.info('Released DiskBinding of a node that is gone', b);
    for (const f of r.failures) logger.warn('Operator write failed, trying again next round', { failure: f });
  }
}
