/**
 * `confboot mini lifecycle`: a cluster that survives reboots and a full outage, on real QEMU VMs.
 * The same stages as `mini up` (image, network, reference boot, provision, boot, init, join) form a
 * control plane and two workers; each node writes a marker to its mounted state disk and stays up.
 * A third, tampered worker (another kernel command line, so PCR 9 differs) boots with them and is
 * refused by the join service on its first join (`refused-join`): once refused it is powered off and
 * its disk image checked on the host (only its initial passphrase opens it), and it takes no part in
 * the steps after. `formation` keeps every node's first-boot evidence (as `mini up` reports it).
 * The operator's master secret is split 2-of-3 into share files the way `confboot init
 * --recovery-shares 3 --recovery-threshold 2` does after init. Then the steps, each checked from
 * real state (stages/lifecycle-steps.ts, stages/outage.ts): re-attestation
 * (worker-1's PCR 9 extended after the join: the node operator flags and cordons it, worker-0 stays
 * green; `confboot verify` live against each node), tampered reboot of worker-1, outage of every
 * VM with k-of-n recovery (the workers rejoin, their kubelets restarted), reset of
 * worker-1 (a failed join after the node lock first, after which the node reboots itself). Everything it started is
 * gone when it returns. kubeadm and the Kubernetes API server are SIMULATED.
 */
import { randomBytes } from 'node:crypto';
import { ShamirSecretSharing } from '../../adapters/crypto/shamir-secret-sharing.js';
import { makeRecoveryShares } from '../../domain/recovery-share-file.js';
import { formCluster, prepareCluster } from './cluster.js';
import { MiniCluster } from './context.js';
import type { MiniSecrets } from './stages/init.js';
import { reattestStep, resetStep, tamperedRebootStep } from './stages/lifecycle-steps.js';
import { bootEvidence, secondsSince, waitBootstrapped } from './stages/node-evidence.js';
import { type LifecycleShares, outageStep } from './stages/outage.js';
import { collectNodeOutcome, diskInVmOf, MINI_SIMULATED } from './stages/outcome.js';
import { tamperedDiskStep } from './stages/tampered-disk.js';
import {
  type LifecycleStepResult,
  type MiniLifecycleOptions,
  type MiniLifecycleResult,
  type MiniNodeSpec,
  planNodes,
} from './types.js';

const SHARES = { total: 3, threshold: 2 };

/**
 * Splits the master secret 2-of-3 into share files, as `confboot init --recovery-shares 3
 * --recovery-threshold 2` does after init (the audited Shamir library through makeRecoveryShares),
 * and another cluster's secret the same way, for the foreign share.
 */
async function makeShares(secrets: MiniSecrets): Promise<LifecycleShares> {
  const sharing = new ShamirSecretSharing();
  const valid = await makeRecoveryShares(
    sharing,
    secrets.masterSecret,
    secrets.masterSalt,
    secrets.clusterId,
    SHARES.total,
    SHARES.threshold,
  );
  const foreignClusterId = randomBytes(32);
  const foreign = await makeRecoveryShares(
    sharing,
    randomBytes(32),
    randomBytes(32),
    foreignClusterId,
    SHARES.total,
    SHARES.threshold,
  );
  return {
    valid,
    foreign: foreign[0] as Uint8Array,
    foreignClusterId: foreignClusterId.toString('hex'),
    ...SHARES,
  };
}

/**
 * The integrity of node `name`'s state disk as its VM read it from the validated LUKS2 header after
 * its bootstrapper (last report of the current boot), e.g. `hmac(sha256)`.
 */
function headerIntegrity(c: MiniCluster, name: string): string | null {
  const state = c
    .reports(name)
    .filter((r) => r.type === 'disk-state')
    .pop();
  return typeof state?.headerIntegrity === 'string' ? state.headerIntegrity : null;
}

/** One `form` entry per good node: initialised or joined, marker written, PCR 15 the cluster's marker. */
async function formSteps(
  c: MiniCluster,
  secrets: MiniSecrets,
  started: number,
): Promise<LifecycleStepResult[]> {
  return Promise.all(
    c.nodes.map(async (n): Promise<LifecycleStepResult> => {
      const r = c.result(n.name);
      r.diskInVm = diskInVmOf(c.reports(n.name));
      let error: string | undefined;
      try {
        if (r.accepted) await waitBootstrapped(c, n.name);
      } catch (err) {
        error = (err as Error).message;
      }
      const e = bootEvidence(c, n.name, secrets);
      const written = c.reports(n.name).some((x) => x.type === 'marker-written');
      return {
        step: 'form',
        node: n.name,
        ok:
          r.accepted && error === undefined && written && e.pcr15 === 'cluster-marker' && e.diskOpen === true,
        pcr15: e.pcr15,
        diskOpen: e.diskOpen === true,
        reason: error ?? (written ? `${r.reason}; marker written to its state disk` : r.reason),
        ...(e.bootstrapper === undefined ? {} : { bootstrapper: e.bootstrapper }),
        seconds: secondsSince(started),
      };
    }),
  );
}

/**
 * Step `refused-join` of tampered node `n` (refused by the join service while the cluster formed):
 * powers it off and leaves the scenario's nodes; holds when the join service refused it naming PCR 9
 * alone, expected as computed from the image, its PCR 15 stayed zero and, on the host, its disk
 * image opens with its initial passphrase and not with the key derived for its UUID.
 */
async function refusedJoinStep(
  c: MiniCluster,
  secrets: MiniSecrets,
  n: MiniNodeSpec,
  started: number,
): Promise<LifecycleStepResult> {
  const r = c.result(n.name);
  await c.stopNode(n.name);
  c.nodes.splice(c.nodes.indexOf(n), 1);
  await collectNodeOutcome(c, n.name, secrets);
  const computed9 = c.expected.computed.get(9)?.toString('hex');
  const ok =
    r.refusedBy === 'join-service' &&
    r.mismatches.map((m) => m.pcr).join() === '9' &&
    r.mismatches[0]?.expected === computed9 &&
    r.mismatches[0]?.actual !== computed9 &&
    r.pcr15?.zero === true &&
    r.diskOnHost?.opensWithInitialPassphrase === true &&
    r.diskOnHost.opensWithDerivedKey === false;
  return {
    step: 'refused-join',
    node: n.name,
    ok,
    pcr15: r.pcr15?.zero ? 'zero' : r.pcr15?.matches ? 'cluster-marker' : 'other',
    diskOpen: false,
    mismatches: r.mismatches,
    reason: `${r.reason}; powered off, its disk image opens on the host with its initial passphrase: ${r.diskOnHost?.opensWithInitialPassphrase}, with the derived key: ${r.diskOnHost?.opensWithDerivedKey}`,
    seconds: secondsSince(started),
  };
}

/** Runs the lifecycle scenario; always removes everything it started. */
export async function miniLifecycle(options: MiniLifecycleOptions): Promise<MiniLifecycleResult> {
  const c = await MiniCluster.open({ ...options, workers: 2, tampered: 1 }, planNodes(2, 1));
  const good = c.nodes.filter((n) => n.boot === 'good');
  const tampered = c.nodes.filter((n) => n.boot === 'tampered');
  const markers = new Map(good.map((n) => [n.name, randomBytes(16).toString('hex')]));
  const steps: LifecycleStepResult[] = [];
  const diskIntegrity: Record<string, string | null> = {};
  let clusterId: string | undefined;
  let formation: MiniLifecycleResult['formation'];
  let result: MiniLifecycleResult | undefined;
  try {
    await prepareCluster(c);
    const started = Date.now();
    const { init, secrets } = await formCluster(
      c,
      // Every good node keeps serving the verification service; the control plane's node operator re-attests.
      (n) =>
        n.boot === 'good'
          ? { marker: markers.get(n.name) as string, stay: true, verifyListen: true, orders: true }
          : {},
      true,
    );
    if (secrets !== undefined) {
      clusterId = secrets.clusterId.toString('hex');
      for (const n of tampered) steps.push(await refusedJoinStep(c, secrets, n, started));
      steps.push(...(await formSteps(c, secrets, started)));
      formation = {
        ...(init === undefined ? {} : { init }),
        computedFromImage: { '9': c.expected.computed.get(9)?.toString('hex') ?? '' },
        nodes: [...good, ...tampered].map((n) => ({ ...c.result(n.name) })),
      };
    }
    if (secrets !== undefined && steps.every((s) => s.ok)) {
      const shares = await makeShares(secrets);
      steps.push(await reattestStep(c, secrets, 'worker-1', 'worker-0'));
      steps.push(await tamperedRebootStep(c, secrets, 'worker-1'));
      steps.push(...(await outageStep(c, secrets, markers, shares)));
      steps.push(await resetStep(c, secrets, 'worker-1'));
      // Every disk as its header says (worker-1's as the production disk mapper formatted it).
      for (const n of c.nodes) diskIntegrity[n.name] = headerIntegrity(c, n.name);
      steps.push(await tamperedDiskStep(c, secrets, markers, 'worker-0'));
    }
    result = {
      accel: c.accel,
      ...(clusterId === undefined ? {} : { clusterId }),
      recoveryShares: SHARES,
      ...(formation === undefined ? {} : { formation }),
      diskIntegrity,
      steps,
      netns: c.network.netns,
      workDir: c.workDir,
      durationMs: 0,
      simulated: MINI_SIMULATED,
      // Every step ran (refused join, form ×3, reattest, tampered reboot, outage ×3, reset, tampered
      // disk) and held.
      ok: steps.length === 1 + 3 + 1 + 1 + 3 + 1 + 1 && steps.every((s) => s.ok),
    };
  } finally {
    const leftovers = await c.teardown(false);
    if (result !== undefined) {
      result.leftovers = leftovers;
      result.durationMs = Date.now() - c.started;
      if (leftovers.length > 0) result.ok = false;
    }
  }
  return result;
}
