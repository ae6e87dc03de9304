/**
 * The join service's Kubernetes adapters behind one loader (real @kubernetes/client-node against the
 * simulated API server on loopback): nothing loads until first use or load(), every adapter reaches
 * the API server once loaded, and a client that cannot load fails load() while Events and evidence
 * never throw into a request.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { lazyKubernetes } from '../../../src/app/join-service/lazy-kubernetes.js';
import { FakeKubeApi } from '../../adapters/kubernetes/fake-kube-api.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-lazy-kube-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const DISK = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';

describe('lazyKubernetes', () => {
  it('loads on first use and then serves cluster facts and disk bindings from the API server', async () => {
    const api = await new FakeKubeApi().start();
    cleanups.push(() => api.close());
    api.seedComponents('k8s-components-1', [
      { url: 'https://example.com/kubelet', hash: 'sha256:aa', install_path: '/k', extract: false },
    ]);
    const dir = tmp();
    writeFileSync(join(dir, 'kubeconfig'), api.kubeconfig());
    const kube = lazyKubernetes(
      { kubeconfigPath: join(dir, 'kubeconfig'), caCertPath: join(dir, 'ca.crt') },
      new FakeClock(),
      new FakeLogger(),
    );
    expect(kube.loaded()).toBe(false);
    expect(api.requests).toHaveLength(0);
    expect(await kube.facts.components()).toEqual([
      expect.objectContaining({ url: 'https://example.com/kubelet', hash: 'sha256:aa' }),
    ]);
    expect(kube.loaded()).toBe(true);
    const binding = { diskUuid: DISK, nodeName: 'worker-1', owner: 'instance/worker-1' };
    expect(await kube.diskBindings.bind(binding)).toMatchObject(binding);
    expect(api.diskBindings.size).toBe(1);
    await kube.load();
  });

  it('a kubeconfig that cannot be loaded fails load(); Events and evidence never throw into a request', async () => {
    const logger = new FakeLogger();
    const kube = lazyKubernetes(
      { kubeconfigPath: join(tmp(), 'missing-kubeconfig'), caCertPath: '/nonexistent/ca.crt' },
      new FakeClock(),
      logger,
    );
    await expect(kube.load()).rejects.toThrow();
    expect(kube.loaded()).toBe(false);
    expect(() =>
      kube.events.refused({
        rpc: 'IssueJoinTicket',
        peer: '192.0.2.5:1',
        variant: 'qemu-vtpm',
        reason: 'deny-list',
        attested: true,
      }),
    ).not.toThrow();
    await kube.evidence.record({
      key: `disk/${DISK}`,
      peer: '192.0.2.5:1',
      variant: 'qemu-vtpm',
      oid: '1.3.9900.5.1',
      document: new Uint8Array([1]),
      nonce: new Uint8Array([2]),
      rpc: 'IssueJoinTicket',
      outcome: 'issued',
      reason: 'ok',
      at: '2026-01-02T00:00:00.000Z',
    });
    expect(logger.events).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'Evidence not recorded',
        fields: expect.objectContaining({ key: `disk/${DISK}` }),
      }),
    ]);
  });
});
