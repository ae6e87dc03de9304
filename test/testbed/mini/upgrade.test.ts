/**
 * `confboot mini upgrade` end to end on real QEMU VMs under TCG: a control plane and a worker
 * from image A, image B (another kernel command line) measured from the image and the reference
 * boot, the dry run of "B only" against the evidence the join service keeps in the cluster, the
 * A+B rollout through ConfigMap join-config, a fresh B worker joining and worker-0 rejoining with A,
 * image A expiring on the join service's clock, every worker rebooting, and every receipt verified
 * against the served JWKS. The dry run's prediction for the config in force after the expiry equals
 * what the join service then does with each worker. kubeadm and the Kubernetes API server are
 * SIMULATED.
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { miniUpgrade } from '../../../src/testbed/mini/upgrade.js';
import { missingForMiniVms, timedProgress } from '../../support/mini-host.js';

const missing = missingForMiniVms();
// Three VMs and three rounds of reboots (several minutes under TCG), in `npm test`.

describe.skipIf(missing.length > 0)(
  `confboot mini upgrade (TCG)${missing.length ? ` — missing ${missing.join(', ')}` : ''}`,
  () => {
    it("the dry run predicts every worker's outcome after image A expires, and every step of the rolling upgrade holds (kubeadm and API server simulated)", async () => {
      const lines: string[] = [];
      const result = await miniUpgrade({
        accel: 'tcg',
        progress: timedProgress('upgrade', lines),
        ...(process.env.CONFBOOT_MINI_CACHE ? { cacheDir: process.env.CONFBOOT_MINI_CACHE } : {}),
      });
      const summary = JSON.stringify(result.steps, null, 2);
      // Prediction == outcome, per worker, for the config in force after image-a expired.
      const predictions = result.steps.filter((s) => s.step === 'prediction');
      expect(predictions.map((s) => s.node).sort(), summary).toEqual(['worker-0', 'worker-1']);
      for (const s of predictions) {
        const [p] = s.predictions ?? [];
        expect(p?.outcome, summary).toBeDefined();
        expect(p?.predicted, `${s.node}: ${s.reason}`).toBe(p?.outcome);
      }
      expect(predictions.find((s) => s.node === 'worker-0')?.predictions?.[0]).toMatchObject({
        predicted: 'refused',
        outcome: 'refused',
      });
      expect(predictions.find((s) => s.node === 'worker-1')?.predictions?.[0]).toMatchObject({
        predicted: 'accepted',
        outcome: 'accepted',
      });
      // The first "B only" dry run refuses the A worker; after the B worker joined and worker-0
      // rejoined with A, it still refuses worker-0 and accepts the B worker.
      const dryRuns = result.steps.filter((s) => s.step === 'dry-run');
      const refused = (i: number) =>
        (dryRuns[i]?.predictions ?? [])
          .filter((p) => p.predicted === 'refused')
          .map((p) => p.node)
          .sort();
      expect(refused(0), summary).toEqual(['worker-0']);
      expect(refused(1), summary).toEqual(['worker-0']);
      expect((dryRuns[1]?.predictions ?? []).map((p) => p.node).sort(), summary).toEqual([
        'worker-0',
        'worker-1',
      ]);
      const expired = result.steps.filter((x) => x.step === 'expired-reboot');
      expect(
        expired.map((s) => s.node),
        summary,
      ).toEqual(['worker-0']);
      for (const s of expired) expect(s.reasonCode, summary).toBe('measurement-set-expired');
      expect(result.steps.find((s) => s.step === 'join-b')?.measurementSet, summary).toBe('image-b');
      expect(result.steps.find((s) => s.step === 'rejoin-a')?.measurementSet, summary).toBe('image-a');
      for (const s of result.steps) expect(s.ok, `${s.step} ${s.node}: ${s.reason}`).toBe(true);
      expect(result.ok, summary).toBe(true);
      expect(result.leftovers).toEqual([]);
      expect(result.simulated.join(' ')).toMatch(/kubeadm.*Kubernetes API server/s);
      // Passed: the run's logs are not needed (a failed run keeps them for reading).
      rmSync(result.workDir, { recursive: true, force: true });
    }, 7_200_000);
  },
);
