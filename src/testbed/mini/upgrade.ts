/**
 * `confboot mini upgrade`: a rolling upgrade with measurement sets on real QEMU VMs, checked against
 * the dry run's predictions. The stages of `mini up` form a control plane and a worker from image
 * A (the node image booted with its kernel command line); the join service on the control plane
 * keeps its evidence in the cluster (EvidenceRecord resources in the SIMULATED API server), records
 * refusals as Events there and signs a receipt for every ticket. Then, each step checked from real
 * state:
 *
 * 1. `image-b`: image B is the same kernel and initramfs with another command line; its expected
 *    PCRs 4 and 9 are computed from it, the firmware PCRs taken from the reference boot's event log;
 * 2. `dry-run` "B only" against the recorded evidence: the A worker is predicted refused;
 * 3. `rollout` A+B: the operator applies sets `image-a` and `image-b` to ConfigMap join-config; the
 *    control plane's kubelet (the agent) updates the mounted file and the join service reloads it;
 * 4. `join-b`: a fresh worker boots image B and joins, matching `image-b` (its event log replays to
 *    B's computed PCRs); `rejoin-a`: worker-0 reboots into image A and rejoins, matching `image-a`;
 * 5. `dry-run` "B only" again: only the A worker is predicted refused, the B worker accepted;
 * 6. `expire-a`: the operator sets `image-a` to expire 30 s later; the join service's own clock
 *    passes it without a reload; the dry run of the config in force then predicts each worker;
 * 7. every worker reboots: the A worker is refused with `measurement-set-expired`
 *    (`expired-reboot`), the B worker rejoins (`reboot-b`); `prediction`: per worker, the prediction
 *    of step 6 equals the outcome;
 * 8. `receipts`: every receipt the join service issued verifies against the JWKS it serves.
 *
 * kubeadm and the Kubernetes API server are SIMULATED. Everything it started is gone when it returns.
 */ import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { formCluster, prepareCluster } from './cluster.js';
import { MiniCluster } from './context.js';
import { computedPcrs } from './measurements.js';
import { akRegistry } from './stages/fleet.js';
import { adminKubeconfigPath } from './stages/init.js';
import { MINI_SIMULATED } from './stages/outcome.js';
import {
  B_NODE,
  dryRunStep,
  expiredRebootStep,
  IMAGE_B_CMDLINE,
  joinBStep,
  type Pcrs,
  predictionSteps,
  type Run,
  receiptsStep,
  recordKeys,
  rejoinStep,
  rolloutStep,
  secondsSince,
  type UpgradeStepResult,
} from './stages/upgrade-steps.js';
import { type MiniUpOptions, NODE_CMDLINE, planNodes } from './types.js';

/**
 * Options of `mini upgrade` (always a control plane, one A worker and one B worker: a second A worker
 * would take the same path as the first, two more TCG boots on the CI's two cores).
 */
export type MiniUpgradeOptions = Omit<MiniUpOptions, 'workers' | 'tampered' | 'keep'>;

/**
 * How long after the `expire-a` rollout starts `image-a` expires: the join service loads the new
 * config well before (the rollout step waits for that); a set that arrives already expired would
 * be refused the same way, only without showing the service's clock pass the expiry.
 */
const EXPIRY_DELAY_MS = 30_000;
/**
 * Margin past the expiry before an A node reboots: a TCG guest's clock starts from the host's RTC
 * (whole seconds) and then runs at the host's rate.
 */
const EXPIRY_MARGIN_MS = 10_000;

/** The outcome of `mini upgrade`. */
export interface MiniUpgradeResult {
  accel: 'kvm' | 'tcg';
  clusterId?: string;
  steps: UpgradeStepResult[];
  netns: string;
  workDir: string;
  durationMs: number;
  simulated: string[];
  leftovers?: string[];
  ok: boolean;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const measurementsOf = (pcrs: Pcrs) =>
  Object.fromEntries([...pcrs].map(([i, v]) => [String(i), { expected: hex(v), warnOnly: false }]));

/** The attestation configs of the scenario. */
function configs(a: Pcrs, b: Pcrs) {
  const setA = (expires?: Date) => ({
    name: 'image-a',
    ...(expires === undefined ? {} : { expires: expires.toISOString().replace(/\.\d{3}Z$/, 'Z') }),
    measurements: measurementsOf(a),
  });
  const setB = { name: 'image-b', measurements: measurementsOf(b) };
  return {
    bOnly: { measurementSets: [setB] },
    aAndB: (aExpires?: Date) => ({ measurementSets: [setA(aExpires), setB] }),
  };
}

/** Runs the upgrade scenario; always removes everything it started. */
export async function miniUpgrade(options: MiniUpgradeOptions): Promise<MiniUpgradeResult> {
  const c = await MiniCluster.open({ ...options, workers: 1, tampered: 0 }, [...planNodes(1, 0), B_NODE]);
  const steps: UpgradeStepResult[] = [];
  const held = () => steps.every((s) => s.ok);
  let clusterId: string | undefined;
  let result: MiniUpgradeResult | undefined;
  try {
    // Every node gets its slot and TPM now; the B worker boots only after the A+B rollout.
    await prepareCluster(c);
    c.nodes.splice(c.nodes.indexOf(B_NODE), 1);
    const started = Date.now();
    const { secrets } = await formCluster(c);
    for (const n of c.nodes) {
      const r = c.result(n.name);
      steps.push({
        step: 'form',
        node: n.name,
        ok: r.accepted,
        config: 'A',
        reason: r.reason,
        seconds: secondsSince(started),
      });
    }
    if (secrets !== undefined && held()) {
      clusterId = secrets.clusterId.toString('hex');
      const akRegistryPath = join(c.workDir, 'ak-registry.json');
      await writeFile(akRegistryPath, JSON.stringify(akRegistry(c)));
      const run: Run = {
        c,
        secrets,
        kubeconfigPath: adminKubeconfigPath(c),
        akRegistryPath,
        keys: recordKeys(c),
      };

      // Image B: the same kernel and initramfs, another command line.
      const a = c.expected.expected;
      const computedB = await computedPcrs(c.image.kernel, c.image.initrd, IMAGE_B_CMDLINE, c.memoryMiB);
      const b: Pcrs = new Map([...a, ...computedB]);
      const differ = [...b].filter(([i, v]) => !a.get(i)?.equals(v)).map(([i]) => i);
      steps.push({
        step: 'image-b',
        node: 'operator',
        ok: differ.length === 1 && differ[0] === 9,
        reason: `image B (command line "${IMAGE_B_CMDLINE}"): PCRs 4 and 9 computed from the kernel, initramfs and command line, the firmware PCRs from the reference boot's event log; differs from A in PCR ${differ.join(', ')}`,
        seconds: 0,
      });
      const cfg = configs(a, b);
      const predicts = (s: UpgradeStepResult, workers: string[], refused: string[]) =>
        s.ok &&
        workers.every(
          (w) =>
            s.predictions?.find((p) => p.node === w)?.predicted ===
            (refused.includes(w) ? 'refused' : 'accepted'),
        );

      let s = await dryRunStep(run, 'B only', cfg.bOnly);
      s.ok = predicts(s, ['worker-0'], ['worker-0']);
      steps.push(s);
      if (held()) steps.push(await rolloutStep(run, 'rollout', 'A+B', cfg.aAndB()));
      if (held()) steps.push(await joinBStep(run, b));
      if (held()) steps.push(await rejoinStep(run, 'rejoin-a', 'worker-0', NODE_CMDLINE, 'image-a'));
      if (held()) {
        s = await dryRunStep(run, 'B only', cfg.bOnly);
        s.ok = predicts(s, ['worker-0', B_NODE.name], ['worker-0']);
        steps.push(s);
      }
      let final: UpgradeStepResult | undefined;
      if (held()) {
        const expires = new Date(Date.now() + EXPIRY_DELAY_MS);
        const label = `A expiring at ${expires.toISOString()}+B`;
        const rolled = await rolloutStep(run, 'expire-a', label, cfg.aAndB(expires));
        steps.push(rolled);
        if (rolled.ok) {
          // No reload: the join service's own clock passes the expiry.
          const wait = expires.getTime() + EXPIRY_MARGIN_MS - Date.now();
          c.progress(`operator         waiting ${Math.ceil(wait / 1000)} s until image-a has expired`);
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
          final = await dryRunStep(run, 'A expired+B', cfg.aAndB(expires));
          final.ok = predicts(final, ['worker-0', B_NODE.name], ['worker-0']);
          steps.push(final);
        }
      }
      if (held() && final !== undefined) {
        // Every worker reboots at once: the A nodes are refused as expired, the B node rejoins.
        steps.push(
          ...(await Promise.all([
            expiredRebootStep(run, 'worker-0'),
            rejoinStep(run, 'reboot-b', B_NODE.name, IMAGE_B_CMDLINE, 'image-b'),
          ])),
        );
        steps.push(...predictionSteps(steps, final, ['worker-0', B_NODE.name]));
      }
      if (held()) steps.push(await receiptsStep(run));
    }
    result = {
      accel: c.accel,
      ...(clusterId === undefined ? {} : { clusterId }),
      steps,
      netns: c.network.netns,
      workDir: c.workDir,
      durationMs: 0,
      simulated: MINI_SIMULATED,
      // form ×2, image-b, dry-run, rollout, join-b, rejoin-a, dry-run, expire-a, dry-run,
      // expired-reboot, reboot-b, prediction ×2, receipts.
      ok: steps.length === 2 + 13 && held(),
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
