/**
 * The node steps of `mini lifecycle`, each on a running cluster and each checked from real state:
 * - `reattest`, on the formed cluster before any reboot: every node's bootstrapper keeps serving the
 *   verification service after it bootstrapped, and the control plane's production `confboot
 *   node-operator` re-attests the joined workers every 5 s with the cordon opted in. The host orders
 *   the tampered worker's agent to extend PCR 9 (enforced by the cluster's attestation config)
 *   through its TPM, then checks through the SIMULATED API server, the operator's metrics and
 *   `confboot verify` (host/reattest-entry.ts): the changed worker is flagged (EvidenceRecord
 *   annotation, Event, metric) and cordoned, the other worker re-attests ok in a later round and is
 *   not cordoned; `confboot verify` accepts the other worker and the control plane and refuses the
 *   changed one naming the PCR, each with a fresh nonce; a replayed document is refused. The changed
 *   worker stays cordoned; its next boot (`tampered-reboot`) resets its PCRs;
 * - `tampered-reboot`: a worker restarts with another kernel command line (PCR 9 differs); the join
 *   service refuses the rejoin naming the register, nothing is issued, its disk stays unmapped and
 *   PCR 15 stays zero (it keeps retrying with backoff);
 * - `reset`: the host marks a stopped worker's disk for reset with the production disk adapter; the
 *   next boot fails after the node lock (SIMULATED kubeadm failing, failed-join.ts): the bootstrapper
 *   marks the disk for reset itself and reboots the VM, which ends; the host boots it again, the
 *   disk mapper wipes and formats the disk (a new LUKS UUID each time) and the node joins fresh; the
 *   join releases the old disk's binding (named in its audit event, gone from the API server's
 *   DiskBindings).
 * A worker's rejoin after a reboot is checked in `outage` (outage.ts: rejoin ticket, marker, PCR 15,
 * kubelet restarted); a single worker rebooting while the rest of the cluster runs rejoins the same
 * way in `mini upgrade` (`rejoin-a`, `reboot-b`).
 */
import { join } from 'node:path';
import { messageOf } from '../../../ports/errors.js';
import type { MiniCluster } from '../context.js';
import type { ReattestEntryInput, ReattestEntryOutput } from '../host/reattest-entry.js';
import { type LifecycleStepResult, NODE_CMDLINE, TAMPERED_CMDLINE } from '../types.js';
import { failedJoinBoot, hostDisk } from './failed-join.js';
import { bootstrapConfig } from './fleet.js';
import { adminKubeconfigPath, type MiniSecrets, runHostEntry } from './init.js';
import { mismatchesOf, waitForRefusal } from './join.js';
import {
  auditMark,
  auditOf,
  bootEvidence,
  secondsSince,
  waitBindingReplaced,
  waitBootstrapped,
} from './node-evidence.js';

/** Boots node `name` again (same disk and TPM) with `cmdline`, staying up; resets the step deadline. */
async function restart(c: MiniCluster, name: string, cmdline: string, what: string): Promise<void> {
  c.t0 = Date.now();
  c.progress(`${name.padEnd(16)} ${what}`);
  await c.rebootNode(name, { cmdline, config: { ...bootstrapConfig(c, c.node(name), false), stay: true } });
}

/** A step that could not be checked. */
export function failed(
  step: LifecycleStepResult['step'],
  node: string,
  started: number,
  err: unknown,
): LifecycleStepResult {
  return { step, node, ok: false, reason: messageOf(err), seconds: secondsSince(started) };
}

/** Step `tampered-reboot` of node `name` (see the module comment); the node is left running. */
export async function tamperedRebootStep(
  c: MiniCluster,
  secrets: MiniSecrets,
  name: string,
): Promise<LifecycleStepResult> {
  const started = Date.now();
  const ip = c.result(name).ip;
  const from = auditMark(c);
  let detail: string;
  let reason: string;
  try {
    await restart(c, name, TAMPERED_CMDLINE, 'reboot with a changed kernel command line');
    const refusal = await waitForRefusal(c, ip, from, () =>
      c.reports(name).some((x) => x.type === 'bootstrapper-exit')
        ? 'its bootstrapper finished: the rejoin was NOT refused'
        : undefined,
    );
    detail = String(refusal.detail ?? '');
    reason = String(refusal.reason);
    // One more PCR 15 report (with the mapping's state) after the refusal.
    const pcr15s = () => c.reports(name).filter((y) => y.type === 'pcr15').length;
    const seen = pcr15s();
    await c.waitReport(c.vm(name), (x) => x.type === 'pcr15' && pcr15s() > seen);
  } catch (err) {
    return failed('tampered-reboot', name, started, err);
  }
  const e = bootEvidence(c, name, secrets);
  const last = c
    .reports(name)
    .filter((x) => x.type === 'pcr15')
    .pop();
  const diskOpen = last?.mapped === true;
  const audit = auditOf(c, ip, from);
  const mismatches = mismatchesOf(detail);
  const nothingIssued = !audit.some((a) => a.outcome === 'issued');
  // Refused during attested TLS (the audit's rpc is then `attested-tls`): no ticket call was served.
  const ok =
    mismatches.some((m) => m.pcr === 9) &&
    audit.some((a) => a.outcome === 'refused') &&
    nothingIssued &&
    !diskOpen &&
    e.pcr15 === 'zero';
  c.progress(
    `${name.padEnd(16)} ${ok ? 'rejoin refused' : 'tampered reboot did NOT hold'}: ${mismatches.map((m) => `PCR ${m.pcr}`).join(', ')}`,
  );
  return {
    step: 'tampered-reboot',
    node: name,
    ok,
    rejoined: false,
    pcr15: e.pcr15,
    diskOpen,
    reason: `rejoin refused by the join service (${reason}): ${detail}${nothingIssued ? '; nothing was issued' : '; SOMETHING WAS ISSUED'}`,
    audit,
    mismatches,
    seconds: secondsSince(started),
  };
}

/** Marks the stopped node's disk image for reset (production adapter, host side); returns its UUID. */
async function markForReset(c: MiniCluster, name: string): Promise<string> {
  const disk = hostDisk(c, name);
  const release = await disk.open();
  try {
    const uuid = (await disk.uuid()).toLowerCase();
    await disk.markDiskForReset();
    return uuid;
  } finally {
    await release();
  }
}

/** Step `reset` of node `name` (see the module comment). */
export async function resetStep(
  c: MiniCluster,
  secrets: MiniSecrets,
  name: string,
): Promise<LifecycleStepResult> {
  const started = Date.now();
  const ip = c.result(name).ip;
  const from = auditMark(c);
  let before: string;
  let failedJoin: NonNullable<LifecycleStepResult['failedJoin']>;
  try {
    await c.stopNode(name);
    before = await markForReset(c, name);
    c.progress(`${name.padEnd(16)} state disk ${before.slice(0, 8)}… marked for reset`);
    failedJoin = await failedJoinBoot(c, name);
    await restart(c, name, NODE_CMDLINE, 'booted again by the host after its reboot');
    await waitBootstrapped(c, name);
  } catch (err) {
    return failed('reset', name, started, err);
  }
  const e = bootEvidence(c, name, secrets);
  const audit = auditOf(c, ip, from);
  const wiped =
    e.diskUuid !== undefined &&
    e.diskUuid.toLowerCase() !== before &&
    c
      .reports(name)
      .some(
        (x) => x.type === 'log' && x.source === 'bootstrapper' && /marked for reset/.test(String(x.line)),
      );
  const joinedFresh =
    /^Node joined the cluster/.test(e.bootstrapper ?? '') &&
    audit.some(
      (a) =>
        a.rpc === 'IssueJoinTicket' &&
        a.outcome === 'issued' &&
        a.diskUuid?.toLowerCase() === e.diskUuid?.toLowerCase(),
    ) &&
    !audit.some((a) => a.rpc === 'IssueRejoinTicket' && a.outcome === 'issued');
  const after = e.diskUuid?.toLowerCase();
  // Each join released the binding of the disk before it: the failed join the original disk's, the
  // fresh join the failed join's.
  const released = (disk: string | undefined, by?: string) =>
    disk !== undefined &&
    audit.some(
      (a) =>
        a.rpc === 'IssueJoinTicket' &&
        a.outcome === 'issued' &&
        (by === undefined || a.diskUuid?.toLowerCase() === by) &&
        a.releasedDisks?.includes(disk) === true,
    );
  const oldBindingReleased =
    after !== undefined &&
    released(before) &&
    released(failedJoin.diskUuid, after) &&
    (await waitBindingReplaced(c, before, after)) &&
    (await waitBindingReplaced(c, failedJoin.diskUuid ?? before, after));
  const rebootedItself =
    failedJoin.rebootRequested &&
    failedJoin.vmEndedItself &&
    failedJoin.headerReset &&
    failedJoin.diskUuid !== before &&
    after !== failedJoin.diskUuid;
  const ok =
    rebootedItself &&
    wiped &&
    joinedFresh &&
    oldBindingReleased &&
    e.pcr15 === 'cluster-marker' &&
    e.marker === null;
  c.progress(
    `${name.padEnd(16)} ${ok ? 'wiped and joined fresh' : 'reset did NOT hold'}: ${e.bootstrapper ?? '-'}`,
  );
  return {
    step: 'reset',
    node: name,
    ok,
    rejoined: false,
    markerIntact: false,
    pcr15: e.pcr15,
    diskOpen: e.diskOpen === true,
    reason: ok
      ? 'kubeadm failing after the node lock: the bootstrapper marked the disk for reset and rebooted the VM; booted again, the disk mapper wiped and formatted the disk (new LUKS UUID, the old marker is gone), the node joined fresh and the join released the old disk binding'
      : `rebooted itself after the failed join ${rebootedItself}, wiped ${wiped}, joined fresh ${joinedFresh}, old binding released ${oldBindingReleased}; bootstrapper: ${e.bootstrapper ?? e.error ?? 'no outcome'}`,
    failedJoin,
    audit,
    diskUuid: { before, ...(after === undefined ? {} : { after }) },
    oldBindingReleased,
    ...(e.bootstrapper === undefined ? {} : { bootstrapper: e.bootstrapper }),
    seconds: secondsSince(started),
  };
}

/** The PCR the step extends: the kernel's measurement of its command line and initramfs. */
export const REATTEST_PCR = 9;

/** Step `reattest` (see the module comment). */
export async function reattestStep(
  c: MiniCluster,
  secrets: MiniSecrets,
  tampered: string,
  good: string,
): Promise<LifecycleStepResult> {
  const started = Date.now();
  c.t0 = started;
  c.progress(`${tampered.padEnd(16)} PCR ${REATTEST_PCR} extended through its TPM after the join`);
  const named = (name: string) => ({ name, ip: c.result(name).ip });
  const input: ReattestEntryInput = {
    kubeconfigPath: adminKubeconfigPath(c),
    controlPlane: named(c.controlPlane.name),
    good: named(good),
    tampered: named(tampered),
    pcr: REATTEST_PCR,
    attestationConfigPath: join(c.workDir, 'attestationConfig.json'),
    akRegistryPath: c.identitiesFile,
    clusterId: secrets.clusterId.toString('hex'),
    deadlineMs: c.remaining(),
  };
  const out = await runHostEntry<ReattestEntryOutput>(c, 'host/reattest-entry', input, 'reattest.log');
  const { ok, error, ...seen } = out;
  const flagged = out.flagged;
  c.progress(
    `${tampered.padEnd(16)} ${ok ? 'flagged and cordoned by re-attestation' : 're-attestation step did NOT hold'}: ${
      flagged?.last?.reason ?? error ?? '-'
    }`,
  );
  return {
    step: 'reattest',
    node: tampered,
    ok,
    reason: ok
      ? `PCR ${REATTEST_PCR} extended after the join: the node operator recorded ${flagged?.last?.reason} on its EvidenceRecord ${flagged?.secondsAfterOrder} s after the order, raised ${flagged?.event?.reason} and cordoned it; ${good} re-attested ok and stayed schedulable; confboot verify accepted ${good} and ${c.controlPlane.name} and refused ${tampered}; a replayed document was refused`
      : (error ?? 'a check of the re-attestation step failed (see reattestation)'),
    reattestation: seen,
    seconds: secondsSince(started),
  };
}
