/**
 * The host's side of `mini lifecycle`'s `reattest` step (src/testbed/mini/host/reattest-entry.ts),
 * bundled and run as its own process the way the step runs it, against the SIMULATED Kubernetes API
 * server over HTTPS on loopback (kube-apiserver cannot run here). The test plays the node operator
 * (a FAKE one: it records results with the production KubeReattestationApi, cordons and writes the
 * Event) judging worker-1 by PCR 9 of a REAL software TPM (swtpm), which the entry's order extends
 * through the production agent order server (node-orders.ts). No verification service listens, so
 * `confboot verify` cannot decide and the entry reports ok=false with what it saw; the VM test
 * (test/testbed/mini/lifecycle.test.ts) covers verify and the replay on real nodes.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../../src/adapters/kubernetes/api.js';
import { KubeEvidenceStore } from '../../../../src/adapters/kubernetes/evidence-store.js';
import { KubeReattestationApi } from '../../../../src/adapters/kubernetes/reattestation-api.js';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import type { EvidenceRecord } from '../../../../src/ports/evidence-store.js';
import { bundleEntry } from '../../../../src/testbed/mini/bundle.js';
import { serveOrders } from '../../../../src/testbed/mini/guest/node-orders.js';
import { OPERATOR_METRICS_PORT, ORDERS_PORT } from '../../../../src/testbed/mini/guest/protocol.js';
import type {
  ReattestEntryInput,
  ReattestEntryOutput,
} from '../../../../src/testbed/mini/host/reattest-entry.js';
import { loadApiServerCredentials } from '../../../../src/testbed/simulated/apiserver-credentials.js';
import { FakeKubeApi } from '../../../../src/testbed/simulated/simulated-kube-api.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { FakeLogger } from '../../../fakes/fake-logger.js';
import { simulatedInit } from '../../../support/simulated-init.js';
import { useSwtpm } from '../../../support/swtpm.js';
import { useTmpDirs } from '../../../support/tmp.js';

const tmp = useTmpDirs('confboot-reattest-entry-');
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

// Loopback addresses of their own: the order and metrics ports are fixed.
const octet = 20 + Math.floor(Math.random() * 200);
const CP = `127.0.${octet}.1`;
const W0 = `127.0.${octet}.2`;
const W1 = `127.0.${octet}.3`;

const node = (name: string, ip: string, unschedulable: boolean) => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name },
  spec: unschedulable ? { unschedulable: true } : {},
  status: {
    addresses: [{ type: 'InternalIP', address: ip }],
    conditions: [{ type: 'Ready', status: 'True' }],
  },
});

const record = (nodeName: string, disk: string, ip: string, at: Date): EvidenceRecord => ({
  key: `disk/${disk}`,
  nodeName,
  peer: `${ip}:40000`,
  variant: 'qemu-vtpm',
  oid: '1.3.9900.1.2',
  document: new Uint8Array([1, 2, 3]),
  nonce: new Uint8Array(32),
  userData: new Uint8Array(32),
  rpc: 'IssueJoinTicket',
  outcome: 'issued',
  reason: 'ok',
  at: at.toISOString(),
});

async function listen(server: Server, host: string, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  cleanups.push(() => new Promise<void>((r) => server.close(() => r())));
}

/** Runs the bundled entry with `input`; its last output line. */
async function runEntry(input: ReattestEntryInput): Promise<ReattestEntryOutput> {
  const bundle = join(tmp(), 'reattest-entry.mjs');
  await writeFile(bundle, await bundleEntry('host/reattest-entry'));
  const nodeModules = join(
    dirname(createRequire(import.meta.url).resolve('@grpc/grpc-js/package.json')),
    '..',
    '..',
  );
  const child = spawn(process.execPath, [bundle], {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: { ...process.env, NODE_PATH: nodeModules },
  });
  cleanups.push(() => {
    child.kill();
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stdin.end(JSON.stringify(input));
  await new Promise((r) => child.on('close', r));
  return JSON.parse(out.trim().split('\n').pop() ?? '') as ReattestEntryOutput;
}

describe('mini lifecycle reattest step, host side (SIMULATED API server, FAKE node operator, REAL swtpm)', () => {
  const swtpm = useSwtpm();

  it('waits for both workers ok, uncordons, orders PCR 9 extended, and reports the flag, Event, cordon and metrics', async () => {
    const dir = tmp();
    const { pkiDir, adminConfPath } = await simulatedInit(dir);
    const credentials = await loadApiServerCredentials(pkiDir, adminConfPath);
    if (credentials === undefined) throw new Error('no API server credentials');
    const api = await new FakeKubeApi({ bearerToken: credentials.token, tls: credentials }).start();
    cleanups.push(() => api.close());
    const kubeconfigPath = join(dir, 'admin.conf');
    await writeFile(kubeconfigPath, api.kubeconfig());
    const kubeConfig = loadKubeConfig(kubeconfigPath);
    api.nodeRecords.cni = true;
    api.nodeRecords.nodes.set('worker-0', node('worker-0', W0, false));
    // Cordoned by an earlier failed round (still joining): the entry uncordons it before the order.
    api.nodeRecords.nodes.set('worker-1', node('worker-1', W1, true));
    const clock = new FakeClock();
    const evidence = new KubeEvidenceStore({ kubeConfig, clock, logger: new FakeLogger() });
    await evidence.record(record('worker-0', 'aaaaaaaa-0000-4000-8000-000000000000', W0, clock.now()));
    await evidence.record(record('worker-1', 'bbbbbbbb-0000-4000-8000-000000000000', W1, clock.now()));
    await evidence.idle();

    // worker-1's agent: the production order server on a real software TPM.
    const tpm = await swtpm();
    const orders = await serveOrders('127.0.0.1', () => {}, {
      tcti: tpm.tcti,
      listen: W1,
      port: ORDERS_PORT,
    });
    cleanups.push(() => new Promise<void>((r) => orders.close(() => r())));
    let failed = 0;
    await listen(
      createServer((_req, res) =>
        res.end(
          `# HELP x\nconfboot_reattestation_total{result="failed",reason="measurement-mismatch"} ${failed}\nconfboot_reattestation_failing_nodes ${failed > 0 ? 1 : 0}\n`,
        ),
      ),
      CP,
      OPERATOR_METRICS_PORT,
    );

    // The FAKE node operator: a round every 300 ms, worker-1 judged by its PCR 9.
    const reattestation = new KubeReattestationApi({ kubeConfig });
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const reader = new Tpm2ToolsTpm({ tcti: tpm.tcti });
    let stop = false;
    const rounds = (async () => {
      while (!stop) {
        const pcr9 = Buffer.from((await reader.readPcrs([9])).get(9) ?? []).toString('hex');
        for (const t of await reattestation.list()) {
          const bad = t.nodeName === 'worker-1' && pcr9 !== '00'.repeat(32);
          const at = new Date().toISOString();
          if (!bad) {
            await reattestation.record(t, { at, ok: true, reason: 'ok' });
            continue;
          }
          await reattestation.record(t, {
            at,
            ok: false,
            reason: 'measurement-mismatch',
            detail: 'PCR9: expected 00…',
          });
          await reattestation.cordon(t.nodeName);
          if (failed++ === 0)
            await core.createNamespacedEvent({
              namespace: 'kube-system',
              body: {
                apiVersion: 'v1',
                kind: 'Event',
                type: 'Warning',
                firstTimestamp: new Date(),
                lastTimestamp: new Date(),
                metadata: { name: 'reattest-worker-1', namespace: 'kube-system' },
                involvedObject: { kind: 'Deployment', name: 'node-operator', namespace: 'kube-system' },
                reason: 'ReattestationMeasurementMismatch',
                message: `re-attestation of node worker-1 at ${W1} failed: measurement-mismatch: PCR9`,
                count: 1,
              },
            });
        }
        await new Promise((r) => setTimeout(r, 300));
      }
    })();
    cleanups.push(async () => {
      stop = true;
      await rounds;
    });

    const out = await runEntry({
      kubeconfigPath,
      controlPlane: { name: 'control-plane-0', ip: CP },
      good: { name: 'worker-0', ip: W0 },
      tampered: { name: 'worker-1', ip: W1 },
      pcr: 9,
      attestationConfigPath: join(dir, 'missing-config.json'),
      akRegistryPath: join(dir, 'missing-registry.json'),
      clusterId: 'ab'.repeat(32),
      deadlineMs: 60_000,
    });
    // The entry is done: stop the FAKE operator's rounds now, while the swtpm they read still runs
    // (useSwtpm's own afterEach stops it before this file's cleanups run).
    stop = true;
    await rounds;
    expect(out.baseline?.map((b) => [b.node, b.last?.ok, b.cordoned])).toEqual([
      ['worker-0', true, false],
      ['worker-1', true, true],
    ]);
    expect(out.uncordonedBeforeOrder).toEqual(['worker-1']);
    expect(out.extended?.pcr).toBe(9);
    expect(out.extended?.before).toBe('00'.repeat(32));
    expect(out.extended?.after).not.toBe(out.extended?.before);
    expect(out.flagged).toMatchObject({
      node: 'worker-1',
      cordoned: true,
      last: { ok: false, reason: 'measurement-mismatch' },
      event: { reason: 'ReattestationMeasurementMismatch' },
    });
    expect(out.flagged?.secondsAfterOrder).toBeGreaterThanOrEqual(0);
    expect(out.others).toEqual([
      expect.objectContaining({
        node: 'worker-0',
        cordoned: false,
        last: expect.objectContaining({ ok: true }),
      }),
    ]);
    expect(out.metrics).toContainEqual(expect.stringMatching(/^confboot_reattestation_failing_nodes 1$/));
    // No attestation config and nobody serving verification here: not ok, and it says why.
    expect(out.ok).toBe(false);
    expect(out.error).toMatch(/attestation-config|missing-config/);
  }, 240_000);
});
