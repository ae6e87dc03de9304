/**
 * `confboot mini up --control-planes 3 --workers 0` end to end on real QEMU VMs under TCG (in
 * `npm test`). The host serves the load balancer
 * (its bridge address): the components and the SIMULATED Kubernetes API server. The operator's init
 * verifies control-plane-0 and brings the cluster up through that API server; every control plane
 * starts its join and key service from what the bring-up applied (read through the API, not copied
 * in by the host); control-plane-0 is stopped and a worker joins through another control plane. Every node is checked from real state (disk keys on the host, PCR 15), and
 * nothing is left running. kubeadm, the API server and the kubelet are simulated (the result's
 * `simulated` list says how).
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { miniHa } from '../../../src/testbed/mini/ha.js';
import { listMiniNamespaces } from '../../../src/testbed/vm/private-network.js';
import { missingForMiniVms, timedProgress } from '../../support/mini-host.js';

const missing = missingForMiniVms();

describe.skipIf(missing.length > 0)(
  `confboot mini up --control-planes 3 (TCG)${missing.length ? ` — skipped: ${missing.join(', ')}` : ''}`,
  () => {
    it('3 control planes and a worker join (the worker through another control plane after control-plane-0 stopped), each join service configured from the API, disks and PCR 15 checked, nothing left (kubeadm, API server, kubelet simulated)', async () => {
      const lines: string[] = [];
      const result = await miniHa({
        controlPlanes: 3,
        workers: 0,
        accel: 'tcg',
        progress: timedProgress('ha', lines),
        ...(process.env.CONFBOOT_MINI_CACHE ? { cacheDir: process.env.CONFBOOT_MINI_CACHE } : {}),
      });
      const summary = JSON.stringify(
        {
          init: result.init,
          api: result.apiServer,
          applied: result.applied,
          nodes: result.nodes,
          operatorDeleted: result.operatorDeleted,
          lines,
        },
        null,
        2,
      );
      expect(result.nodes.map((n) => n.name).sort(), summary).toEqual([
        'control-plane-0',
        'control-plane-1',
        'control-plane-2',
        'worker-0',
      ]);
      expect(result.init?.ok, summary).toBe(true);
      expect(result.init?.attestationChecks, summary).toContain('ok ak-trust');
      // The load balancer is the host's stable address; the API server there recorded the bring-up.
      expect(result.controlPlaneEndpoint, summary).toMatch(/^10\.\d+\.\d+\.1:6443$/);
      const applied = result.applied.map((a) => `${a.kind}/${a.name}`);
      for (const want of [
        'CustomResourceDefinition/nodeversions.update.edgeless.systems',
        'CustomResourceDefinition/joiningnodes.update.edgeless.systems',
        'Secret/constellation-mastersecret',
        'Secret/key-service-tls',
        'Secret/join-service-key-service-tls',
        'ConfigMap/join-config',
        'ConfigMap/k8s-components',
        'NodeVersion/constellation-version',
        'DaemonSet/join-service',
        'Deployment/key-service',
      ])
        expect(applied, summary).toContain(want);
      expect(result.apiServer?.violations, summary).toEqual([]);
      expect(result.components[0]?.hash, summary).toMatch(/^sha256:[0-9a-f]{64}$/);
      for (const n of result.nodes) {
        expect(n.accepted, summary).toBe(true);
        expect(n.diskInVm, summary).toMatchObject({ active: true, initialPassphraseOpens: false });
        expect(n.diskOnHost, summary).toEqual({
          opensWithInitialPassphrase: false,
          opensWithDerivedKey: true,
        });
        expect(n.pcr15?.matches, summary).toBe(true);
      }
      const node = (name: string) => result.nodes.find((n) => n.name === name);
      // Kubelet client certificates: only through CSRs the node operator approved for the ticket,
      // and every JoiningNode deleted by the operator, none by the host.
      expect(node('control-plane-0')?.kubeletClientCert, summary).toEqual({
        via: 'kubeadm-init',
        approvedBy: null,
      });
      for (const n of result.nodes.filter((x) => x.name !== 'control-plane-0'))
        expect(n.kubeletClientCert, summary).toMatchObject({ via: 'csr', approvedBy: 'AttestedJoinTicket' });
      expect(result.hostDeleted, summary).toEqual([]);
      expect(result.operatorDeleted, summary).toContain('control-plane (control-plane-1)');
      expect(node('control-plane-0')?.joinedVia, summary).toBe('init');
      for (const cp of ['control-plane-1', 'control-plane-2'])
        expect(node(cp)?.joinedVia, summary).toMatch(/^control-plane-\d$/);
      // Every control plane's join service was configured from what the bring-up applied.
      for (const cp of ['control-plane-0', 'control-plane-1', 'control-plane-2'])
        expect(node(cp)?.volumesFromApi?.sort(), summary).toEqual([
          'configmap/join-config',
          'secret/constellation-mastersecret',
          'secret/join-service-key-service-tls',
          'secret/key-service-tls',
        ]);
      // The worker joined after control-plane-0 stopped, through another control plane.
      expect(result.stopped).toBe('control-plane-0');
      expect(node('worker-0')?.joinedVia, summary).toMatch(/^control-plane-[12]$/);
      expect(result.ok, summary).toBe(true);
      expect(result.leftovers, summary).toEqual([]);
      expect((await listMiniNamespaces()).map((n) => n.name)).not.toContain(result.netns);
      // Passed: the run's logs are not needed (a failed run keeps them for reading).
      rmSync(result.workDir, { recursive: true, force: true });
    }, 3_600_000);
  },
);
