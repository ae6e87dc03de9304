/**
 * Stage `join`: each worker from boot to its outcome. A good worker's bootstrapper exits 0 after
 * the join service validated its quote and issued a ticket; a tampered worker is refused by the
 * join service, which names every mismatching PCR (expected and actual) in its audit line. Also
 * waits until the control plane runs the key service and the join service after init, and reads
 * from the API server's node records how each kubelet got its client certificate and who deleted
 * the JoiningNodes.
 */

import { JOIN_SERVICE_PORT } from '../../../app/defaults.js';
import { formatMismatch } from '../../../ports/measurement-policy.js';
import {
  joiningNodeDeleters,
  kubeletClientCertOf,
  type NodeRecordsState,
} from '../../simulated/node-records-state.js';
import type { MiniCluster } from '../context.js';
import type { MiniNodeResult, MiniNodeSpec, MiniResult, PcrMismatch } from '../types.js';
import { followBoot } from './boot-evidence.js';

/** A join-service (or other pino) line forwarded by the control-plane VM, parsed. */
export function pinoLine(r: Record<string, unknown>, source: string): Record<string, unknown> | undefined {
  if (r.type !== 'log' || r.source !== source || typeof r.line !== 'string') return undefined;
  try {
    const v = JSON.parse(r.line) as unknown;
    return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The join service's audit lines so far (the control plane's current boot). */
export function joinServiceLines(c: MiniCluster): Record<string, unknown>[] {
  return c
    .reports(c.controlPlane.name)
    .map((x) => pinoLine(x, 'join-service'))
    .filter((l): l is Record<string, unknown> => l !== undefined);
}

/** Whether an audit line's peer is address `ip`. */
export function fromPeer(line: Record<string, unknown>, ip: string): boolean {
  return typeof line.peer === 'string' && (line.peer === ip || line.peer.startsWith(`${ip}:`));
}

/** The PCR mismatches of a refusal's detail ("PCR9: expected <hex>, got <hex>"). */
export function mismatchesOf(detail: string): { pcr: number; expected: string; actual: string | null }[] {
  return [...detail.matchAll(/PCR(\d+): expected ([0-9a-f]+), got ([0-9a-f]+|nothing)/g)].map((m) => ({
    pcr: Number(m[1]),
    expected: m[2] ?? '',
    actual: m[3] === 'nothing' ? null : (m[3] ?? null),
  }));
}

/** A parsed mismatch in the one mismatch text (`PCR9: expected <hex>, got <hex>`). */
export function describePcrMismatch(m: PcrMismatch): string {
  const bytes = (hex: string) => Buffer.from(hex, 'hex');
  const actual = m.actual === null ? undefined : bytes(m.actual);
  return formatMismatch({ index: m.pcr, expected: bytes(m.expected), actual, warnOnly: false });
}

/** Waits (bounded by the run's deadline) for the join service's refusal of `ip`; throws when `gaveUp` says so. */
export async function waitForRefusal(
  c: MiniCluster,
  ip: string,
  after: number,
  gaveUp: () => string | undefined,
): Promise<Record<string, unknown>> {
  for (;;) {
    const refusal = joinServiceLines(c)
      .slice(after)
      .find((l) => l.outcome === 'refused' && fromPeer(l, ip));
    if (refusal !== undefined) return refusal;
    if (c.remaining() <= 1) throw new Error('the join service did not refuse it in time');
    c.checkStopped();
    const reason = gaveUp();
    if (reason !== undefined) throw new Error(reason);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/**
 * A worker: joined (the bootstrapper exited 0), refused by the join service, or failed. A worker
 * that `stays` keeps running; else it powers off after joining.
 */
export async function workerStage(c: MiniCluster, n: MiniNodeSpec, stays = false): Promise<void> {
  const r = c.result(n.name);
  try {
    await followBoot(c, n.name);
    const vm = c.vm(n.name);
    if (n.boot === 'good') {
      const exit = await c.waitReport(vm, (x) => x.type === 'bootstrapper-exit');
      if (exit.type === 'error' || exit.code !== 0)
        throw new Error(
          `bootstrapper ${exit.type === 'error' ? String(exit.message) : `exited ${String(exit.code)}`}`,
        );
      await c.waitReport(vm, (x) => x.type === 'pcr15' && x.when === 'after');
      r.accepted = true;
      r.reason = 'joined: the join service validated its quote and issued a ticket';
      c.say(n.name, 'joined');
      if (!stays) await vm.waitForExit(c.accel === 'kvm' ? 30_000 : 120_000);
      return;
    }
    // Tampered: wait for the join service's refusal of this address, then one more PCR 15 report.
    const refusal = await waitForRefusal(c, r.ip, 0, () =>
      c.reports(n.name).some((x) => x.type === 'bootstrapper-exit')
        ? 'its bootstrapper finished: it was NOT refused'
        : undefined,
    );
    const detail = String(refusal.detail ?? '');
    r.refusedBy = 'join-service';
    r.mismatches.push(...mismatchesOf(detail));
    r.reason = `refused by the join service (${String(refusal.reason)}): ${detail}`;
    const pcr15s = () => c.reports(n.name).filter((y) => y.type === 'pcr15').length;
    const seen = pcr15s();
    await c.waitReport(vm, (x) => x.type === 'pcr15' && pcr15s() > seen);
    c.say(n.name, 'refused', r.mismatches.map(describePcrMismatch).join('; '));
  } catch (err) {
    c.fail(n.name, err);
  }
}

/** Waits until the initialised control plane runs the key service and the join service. */
export async function servicesStage(c: MiniCluster): Promise<void> {
  const cp = c.controlPlane.name;
  const vm = c.vm(cp);
  try {
    await c.waitReport(vm, (x) => x.type === 'pcr15' && x.when === 'after');
    await c.waitReport(vm, (x) => x.type === 'started-program' && x.source === 'join-service');
    c.progress(
      `${cp.padEnd(16)} runs confboot key-service and confboot join-service (:${JOIN_SERVICE_PORT})`,
    );
  } catch (err) {
    c.fail(cp, err);
  }
}

/** The kubelet credentials part of a result: each node's client certificate, who deleted JoiningNodes. */
export interface KubeletCredentials {
  nodes: MiniNodeResult[];
  hostDeleted: string[];
  operatorDeleted: string[];
  /**
   * Every joined node but `first` got its certificate through a CSR the node operator approved, the
   * operator deleted a JoiningNode when any node joined, and nobody else deleted one.
   */
  held: boolean;
}

/** Reads {@link KubeletCredentials} from the API server's node records (undefined: never reported). */
export function kubeletCredentials(
  nodes: MiniNodeResult[],
  first: string,
  records: Partial<NodeRecordsState> | undefined,
): KubeletCredentials {
  const csrs = records?.csrs ?? [];
  const deletions = records?.joiningNodeDeletions ?? [];
  const withCerts = nodes.map((n) => ({
    ...n,
    kubeletClientCert: kubeletClientCertOf(n.name === first, n.name, csrs),
  }));
  const { operatorDeleted, hostDeleted } = joiningNodeDeleters(deletions);
  const joined = withCerts.filter((n) => n.name !== first && n.boot === 'good' && n.accepted);
  const held =
    records !== undefined &&
    hostDeleted.length === 0 &&
    (joined.length === 0 || operatorDeleted.length > 0) &&
    joined.every((n) => n.kubeletClientCert.approvedBy === 'AttestedJoinTicket');
  return { nodes: withCerts, hostDeleted, operatorDeleted, held };
}

/**
 * `mini up`'s result with the kubelet credentials from the node records the control plane
 * reported last; `ok` also needs them held.
 */
export function withKubeletCredentials(c: MiniCluster, result: MiniResult): MiniResult {
  const records = c
    .reports(c.controlPlane.name)
    .filter((x) => x.type === 'node-records')
    .pop() as Partial<NodeRecordsState> | undefined;
  const k = kubeletCredentials(result.nodes, c.controlPlane.name, records);
  return {
    ...result,
    nodes: k.nodes,
    hostDeleted: k.hostDeleted,
    operatorDeleted: k.operatorDeleted,
    ok: result.ok && k.held,
  };
}
