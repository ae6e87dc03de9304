/**
 * Evidence of one node's current boot for the lifecycle steps, from what the VM reported (the
 * bootstrapper's exit and last line, the state disk's mapping and LUKS UUID, the marker read from
 * the mounted state disk, PCR 15 read through /dev/tpmrm0) and from the join service's audit
 * records on the control plane.
 */
import type { MiniCluster } from '../context.js';
import type { AuditRecord, LifecycleStepResult } from '../types.js';
import type { MiniSecrets } from './init.js';
import { fromPeer, joinServiceLines } from './join.js';
import { pcr15Evidence } from './outcome.js';

/** What one boot of a node showed. */
export interface BootEvidence {
  bootstrapper: string | undefined;
  exitCode: number | null | undefined;
  diskOpen: boolean | undefined;
  diskUuid: string | undefined;
  marker: string | null | undefined;
  pcr15: NonNullable<LifecycleStepResult['pcr15']>;
  error: string | undefined;
}

/** Reads the evidence of node `name`'s current boot so far. */
export function bootEvidence(c: MiniCluster, name: string, secrets: MiniSecrets): BootEvidence {
  const reports = c.reports(name);
  const exit = reports.find((r) => r.type === 'bootstrapper-exit');
  const state = reports.find((r) => r.type === 'disk-state');
  const marker = reports.find((r) => r.type === 'marker');
  const pcr = reports.filter((r) => r.type === 'pcr15' && typeof r.value === 'string').pop();
  const error = reports.find((r) => r.type === 'error');
  const line = reports
    .filter((r) => r.type === 'log' && r.source === 'bootstrapper' && typeof r.line === 'string')
    .map((r) => String(r.line))
    .filter((l) => l.startsWith('Node ') || l.startsWith('Disk mapper'))
    .pop();
  let pcr15: BootEvidence['pcr15'] = 'unread';
  if (pcr !== undefined) {
    const e = pcr15Evidence(String(pcr.value), secrets);
    pcr15 = e.matches ? 'cluster-marker' : e.zero ? 'zero' : 'other';
  }
  return {
    bootstrapper: line,
    exitCode: exit === undefined ? undefined : (exit.code as number | null),
    diskOpen: state === undefined ? undefined : state.active === true,
    diskUuid: state === undefined ? undefined : String(state.uuid),
    marker: marker === undefined ? undefined : (marker.marker as string | null),
    pcr15,
    error: error === undefined ? undefined : String(error.message),
  };
}

/**
 * Whether node `name`'s bootstrapper restarted the kubelet in this boot (SIMULATED kubelet, on by
 * default): its outcome line says so, and the kubelet ran with the state disk mounted and the
 * kubelet credentials of the first join on it.
 */
export function kubeletRestartOf(
  c: MiniCluster,
  name: string,
  bootstrapper: string | undefined,
): { kubeletRestart: { stateMounted: boolean; kubeletCredentials: boolean }; restarted: boolean } {
  const seen = c.reports(name).find((r) => r.type === 'kubelet-restarted');
  const kubeletRestart = {
    stateMounted: seen?.stateMounted === true,
    kubeletCredentials: seen?.kubeletCredentials === true,
  };
  return {
    kubeletRestart,
    restarted:
      /, kubelet restarted$/.test(bootstrapper ?? '') &&
      kubeletRestart.stateMounted &&
      kubeletRestart.kubeletCredentials,
  };
}

/** Waits until node `name`'s bootstrapper finished this boot and the agent read the marker. */
export async function waitBootstrapped(c: MiniCluster, name: string): Promise<void> {
  const r = await c.waitReport(
    c.vm(name),
    (x) => x.type === 'marker' || (x.type === 'bootstrapper-exit' && x.code !== 0),
  );
  if (r.type === 'error') throw new Error(`in the VM: ${String(r.message)}`);
  if (r.type === 'bootstrapper-exit') throw new Error(`its bootstrapper exited ${String(r.code)}`);
}

/** The join service's audit records about address `ip`, from record `from` of the current boot on. */
export function auditOf(c: MiniCluster, ip: string, from = 0): AuditRecord[] {
  return joinServiceLines(c)
    .slice(from)
    .filter((l) => l.event === 'join-audit' && fromPeer(l, ip))
    .map((l) => ({
      rpc: String(l.rpc),
      outcome: String(l.outcome),
      reason: String(l.reason),
      ...(typeof l.diskUuid === 'string' ? { diskUuid: l.diskUuid } : {}),
      ...(Array.isArray(l.releasedDisks) ? { releasedDisks: l.releasedDisks.map(String) } : {}),
    }));
}

/**
 * Waits until the control plane's SIMULATED API server reports a DiskBinding for disk `present`
 * and none for disk `gone` (it reports its objects every 2 s when they change); false when the
 * step's deadline passes first.
 */
export async function waitBindingReplaced(c: MiniCluster, gone: string, present: string): Promise<boolean> {
  const uuids = (r: Record<string, unknown>) =>
    (Array.isArray(r.diskBindings) ? r.diskBindings : []).map((d) =>
      String((d as { diskUUID?: unknown }).diskUUID).toLowerCase(),
    );
  try {
    await c.waitReport(c.vm(c.controlPlane.name), (r) => {
      if (r.type !== 'api-server') return false;
      const u = uuids(r);
      return u.includes(present) && !u.includes(gone);
    });
    return true;
  } catch {
    return false;
  }
}

/** How many join service lines the control plane's current boot has logged. */
export function auditMark(c: MiniCluster): number {
  return joinServiceLines(c).length;
}

/** Seconds since `started`. */
export function secondsSince(started: number): number {
  return Math.round((Date.now() - started) / 1000);
}
