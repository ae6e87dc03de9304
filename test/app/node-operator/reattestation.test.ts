/**
 * The node operator's re-attestation end to end: joined nodes with real software TPMs (swtpm)
 * booted like the demo image and marked with the cluster's ID (PCR 15) as a joined node is, each
 * serving qemu-vtpm documents through the production issuer and the real verification service on
 * its own loopback address, and the SIMULATED API server (a stand-in for kube-apiserver, which cannot
 * run here) over real HTTPS with the bring-up's RBAC, called as the node operator's ServiceAccount.
 * One worker's PCR is extended after its join; another has nothing listening.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { V1ConfigMap, V1Deployment } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQemuVtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import type { VerificationHttpServer } from '../../../src/adapters/http/verification-server.js';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { KubeEvidenceStore } from '../../../src/adapters/kubernetes/evidence-store.js';
import { LAST_REATTESTATION_ANNOTATION } from '../../../src/adapters/kubernetes/reattestation-api.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { Pcr15Marker } from '../../../src/adapters/tpm/pcr15-marker.js';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { nodeOperatorCommand, reattestationSettings } from '../../../src/app/cli/node-operator.js';
import { renderObjects } from '../../../src/app/manifests/manifests.js';
import {
  fileVerifier,
  type ReattestationSettings,
  wireReattestation,
} from '../../../src/app/node-operator/reattestation.js';
import { runNodeOperator } from '../../../src/app/node-operator/run.js';
import { parseOptions } from '../../../src/app/program/options.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { startVerificationService } from '../../../src/app/verification-service/serve.js';
import {
  expectedAttestationConfig,
  GOOD_BOOT,
  measureBoot,
} from '../../../src/testbed/demo/boot-measurements.js';
import { kubeletCluster } from '../../support/kubelet-cluster.js';
import { freePort } from '../../support/net.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-reattest-app-');
const clusterId = new Uint8Array(32).fill(0x42);
const swtpms: SwtpmInstance[] = [];
const services: VerificationHttpServer[] = [];
let files: { dir: string; config: string; registry: string };
let port: number;

/** Joined node at `host`: booted like the demo image, PCR 15 marked with the cluster's ID, then `after`. */
async function joinedNode(host: string, after?: (tpm: Tpm2ToolsTpm) => Promise<void>) {
  const swtpm = await startSwtpm();
  swtpms.push(swtpm);
  const tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
  await measureBoot(tpm, GOOD_BOOT);
  await new Pcr15Marker(tpm).markBootstrapped(clusterId);
  await after?.(tpm);
  const issuer = createQemuVtpmIssuer(tpm, { oid: variantOid('qemu-vtpm') });
  services.push(
    await startVerificationService(
      { issuer, clock: new SystemClock(), logger: silentLogger },
      { listen: { host, port } },
    ),
  );
  return Buffer.from(await tpm.attestationKeyPublic()).toString('base64');
}

beforeAll(async () => {
  port = await freePort('127.0.0.2');
  const good = await joinedNode('127.0.0.2');
  // Changed after its join: a PCR the config checks extended through the node's TPM.
  const tampered = await joinedNode('127.0.0.3', (tpm) =>
    tpm.pcrEvent(12, new TextEncoder().encode('init=/bin/sh, after the join')),
  );
  const dir = await mkdtemp(join(tmpdir(), 'confboot-reattest-'));
  files = { dir, config: join(dir, 'attestation.json'), registry: join(dir, 'registry.json') };
  await writeFile(files.config, JSON.stringify(expectedAttestationConfig()));
  await writeFile(
    files.registry,
    JSON.stringify({
      'w-good': { ip: '127.0.0.2', attestationKeyPublic: good },
      'w-tampered': { ip: '127.0.0.3', attestationKeyPublic: tampered },
    }),
  );
}, 120_000);

afterAll(async () => {
  for (const s of services) await s.close();
  for (const s of swtpms) await s.stop();
  if (files) await rm(files.dir, { recursive: true, force: true });
});

const node = (name: string, ip: string) => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name, creationTimestamp: '2026-11-01T00:00:00Z', labels: {} },
  spec: {},
  status: {
    addresses: [{ type: 'InternalIP', address: ip }],
    conditions: [{ type: 'Ready', status: 'True' }],
  },
});

/** The cluster: three joined workers (good, tampered, silent at 127.0.0.4) with issued records. */
async function cluster() {
  const c = await kubeletCluster(tmp());
  const store = new KubeEvidenceStore({
    kubeConfig: loadKubeConfig(await c.serviceAccountConf('join-service')),
    clock: new SystemClock(),
    logger: silentLogger,
  });
  for (const [i, [name, ip]] of [
    ['w-good', '127.0.0.2'],
    ['w-tampered', '127.0.0.3'],
    ['w-silent', '127.0.0.4'],
  ].entries()) {
    c.api.nodeRecords.nodes.set(name as string, node(name as string, ip as string));
    await store.record({
      key: `disk/00000000-0000-4000-8000-00000000000${i}`,
      nodeName: name as string,
      peer: `${ip}:40000`,
      variant: 'qemu-vtpm',
      oid: variantOid('qemu-vtpm'),
      document: new Uint8Array([1]),
      nonce: new Uint8Array(32),
      rpc: 'IssueJoinTicket',
      outcome: 'issued',
      reason: 'ok',
      at: new Date().toISOString(),
    });
  }
  await store.idle();
  return c;
}

function settings(cordon: boolean): ReattestationSettings {
  return {
    variant: 'qemu-vtpm',
    attestationConfigPath: files.config,
    clusterId,
    lookups: { qemuAkRegistryPath: files.registry },
    intervalMs: 60_000,
    cordon,
    port,
    deadlineMs: 3000,
  };
}

describe('node operator re-attestation (real swtpm nodes and verification service; SIMULATED API server)', () => {
  it('flags the node changed after its join and the silent one, records, raises Events, counts, and cordons only on opt-in', async () => {
    const c = await cluster();
    try {
      const kubeConfig = loadKubeConfig(await c.serviceAccountConf('node-operator'));
      const wired = wireReattestation(settings(false), {
        kubeConfig,
        clock: new SystemClock(),
        logger: silentLogger,
      });
      const report = await wired.reattestation.round();
      await wired.events.idle();
      const byNode = Object.fromEntries(report.results.map((r) => [r.nodeName, r]));
      expect(byNode['w-good']).toMatchObject({ ok: true, reason: 'ok', cordoned: false });
      expect(byNode['w-tampered']).toMatchObject({
        ok: false,
        reason: 'measurement-mismatch',
        cordoned: false,
      });
      expect(byNode['w-silent']).toMatchObject({ ok: false, reason: 'unreachable', cordoned: false });
      const annotation = (disk: number) =>
        JSON.parse(
          c.api.evidenceRecords.get(`disk-00000000-0000-4000-8000-00000000000${disk}`)?.metadata
            ?.annotations?.[LAST_REATTESTATION_ANNOTATION],
        );
      expect(annotation(0)).toMatchObject({ ok: true, reason: 'ok' });
      expect(annotation(1)).toMatchObject({ ok: false, reason: 'measurement-mismatch' });
      expect(annotation(2)).toMatchObject({ ok: false, reason: 'unreachable' });
      expect([...c.api.events.values()].map((e) => e.reason).sort()).toEqual([
        'ReattestationMeasurementMismatch',
        'ReattestationUnreachable',
      ]);
      const metrics = await wired.metrics.registry.metrics();
      expect(metrics).toContain('confboot_reattestation_total{result="ok",reason="ok"} 1');
      expect(metrics).toContain(
        'confboot_reattestation_total{result="failed",reason="measurement-mismatch"} 1',
      );
      expect(metrics).toContain('confboot_reattestation_total{result="failed",reason="unreachable"} 1');
      expect(metrics).toContain('confboot_reattestation_failing_nodes 2');
      expect([...c.api.nodeRecords.nodes.values()].every((n) => n.spec?.unschedulable !== true)).toBe(true);
      expect(c.api.forbidden).toEqual([]);
      expect(c.api.violations).toEqual([]);
    } finally {
      await c.close();
    }
  }, 60_000);

  it('--once with the cordon opt-in cordons the failed nodes and leaves the good one schedulable', async () => {
    const c = await cluster();
    try {
      const report = await runNodeOperator({
        kubeconfigPath: await c.serviceAccountConf('node-operator'),
        once: true,
        signal: new AbortController().signal,
        logger: silentLogger,
        reattestation: settings(true),
      });
      expect(
        report?.reattestation?.results
          .filter((r) => r.cordoned)
          .map((r) => r.nodeName)
          .sort(),
      ).toEqual(['w-silent', 'w-tampered']);
      expect(c.api.nodeRecords.nodes.get('w-good')?.spec?.unschedulable).toBeUndefined();
      expect(c.api.nodeRecords.nodes.get('w-tampered')?.spec?.unschedulable).toBe(true);
      expect(c.api.nodeRecords.nodes.has('w-tampered')).toBe(true);
      expect(c.api.violations).toEqual([]);
    } finally {
      await c.close();
    }
  }, 60_000);

  it('refuses to re-attest a vTPM variant without the cluster ID (the node-lock register could not be checked)', () => {
    const { clusterId: _c, ...rest } = settings(false);
    expect(() => fileVerifier(rest, new SystemClock(), silentLogger)).toThrow('needs the cluster ID');
  });

  it('refuses to re-attest while the cluster ID file is empty, and uses it from the round it is written in', async () => {
    const idFile = join(files.dir, 'cluster-id-later');
    await writeFile(idFile, '\n');
    const { clusterId: _c, ...rest } = settings(false);
    const verifier = fileVerifier({ ...rest, clusterIdPath: idFile }, new SystemClock(), silentLogger);
    await expect(verifier.current()).rejects.toThrow('the cluster ID is not known yet');
    await writeFile(idFile, 'not hex\n');
    await expect(verifier.current()).rejects.toThrow('want the cluster ID as 64 hex digits');
    await writeFile(idFile, `${Buffer.from(clusterId).toString('hex')}\n`);
    await expect(verifier.current()).resolves.toBeDefined();
  });
});

/**
 * The Deployment `confboot manifests --cloud qemu --variant qemu-vtpm` renders, run as the kubelet
 * would run it: its ConfigMap volumes laid out as files under a temporary root (each key a file, as
 * the kubelet writes them), its args parsed by the command's own table with their absolute paths
 * moved under that root. Only the verification port and the per-node deadline are the test's own
 * (the nodes listen on a free loopback port).
 */
describe('the node operator Deployment as rendered (real swtpm nodes; SIMULATED API server)', () => {
  async function deployed(id: Uint8Array | undefined) {
    const root = await mkdtemp(join(tmpdir(), 'confboot-operator-pod-'));
    const objects = renderObjects({
      cloud: 'qemu',
      variant: 'qemu-vtpm',
      attestationConfig: JSON.stringify(expectedAttestationConfig()),
      ...(id === undefined ? {} : { clusterId: id }),
    }).map((r) => r.object);
    const deployment = objects.find(
      (o) => o.kind === 'Deployment' && o.metadata?.name === 'node-operator',
    ) as V1Deployment;
    const pod = deployment.spec?.template.spec;
    const container = pod?.containers[0];
    const configMap = (name: string) =>
      objects.find((o) => o.kind === 'ConfigMap' && o.metadata?.name === name) as V1ConfigMap;
    for (const mount of container?.volumeMounts ?? []) {
      const volume = pod?.volumes?.find((v) => v.name === mount.name);
      const map = configMap(volume?.configMap?.name ?? '');
      // The operator's AK registry is the one the operator registered its VMs' keys in.
      const data =
        map.metadata?.name === 'join-ak-registry'
          ? { 'ak-registry.json': await readFile(files.registry, 'utf8') }
          : map.data;
      for (const [key, text] of Object.entries(data ?? {})) {
        const path = join(root, mount.mountPath, key);
        await mkdir(dirname(path), { recursive: true });
        await writeFile(path, text);
      }
      for (const [key, b64] of Object.entries(map.binaryData ?? {}))
        await writeFile(join(root, mount.mountPath, key), Buffer.from(b64, 'base64'));
    }
    const args = (container?.args ?? []).slice(1).map((a) => a.replace(/=\//, `=${root}/`));
    const values = parseOptions(
      [...args, `--verification-port=${port}`, '--reattest-deadline=3s', '--once'],
      nodeOperatorCommand,
    );
    return { root, args: container?.args ?? [], settings: reattestationSettings(values!) };
  }

  it('re-attests every joined node with the mounted join-config and AK registry: the changed one fails, the good one passes', async () => {
    const pod = await deployed(clusterId);
    const c = await cluster();
    try {
      expect(pod.args).toContain('--cluster-id-file=/var/config/clusterId');
      const report = await runNodeOperator({
        kubeconfigPath: await c.serviceAccountConf('node-operator'),
        once: true,
        signal: new AbortController().signal,
        logger: silentLogger,
        ...(pod.settings === undefined ? {} : { reattestation: pod.settings }),
      });
      const byNode = Object.fromEntries((report?.reattestation?.results ?? []).map((r) => [r.nodeName, r]));
      expect(byNode['w-good']).toMatchObject({ ok: true, reason: 'ok', cordoned: false });
      expect(byNode['w-tampered']).toMatchObject({ ok: false, reason: 'measurement-mismatch' });
      expect(byNode['w-silent']).toMatchObject({ ok: false, reason: 'unreachable' });
      expect(c.api.forbidden).toEqual([]);
    } finally {
      await c.close();
      await rm(pod.root, { recursive: true, force: true });
    }
  }, 60_000);

  it('before the cluster ID is in join-config, the round fails naming it instead of passing nodes unchecked', async () => {
    const pod = await deployed(undefined);
    const c = await cluster();
    try {
      await expect(
        runNodeOperator({
          kubeconfigPath: await c.serviceAccountConf('node-operator'),
          once: true,
          signal: new AbortController().signal,
          logger: silentLogger,
          ...(pod.settings === undefined ? {} : { reattestation: pod.settings }),
        }),
      ).rejects.toThrow(/the cluster ID is not known yet: .*clusterId is empty/);
      expect(c.api.evidenceRecords.size).toBe(3);
      expect(
        [...c.api.evidenceRecords.values()].every(
          (r) => r.metadata?.annotations?.[LAST_REATTESTATION_ANNOTATION] === undefined,
        ),
      ).toBe(true);
    } finally {
      await c.close();
      await rm(pod.root, { recursive: true, force: true });
    }
  }, 60_000);
});
