/**
 * The shared Kubernetes client plumbing (loadKubeConfig) and KubeDiskBindings through the real
 * @kubernetes/client-node against a SIMULATED Kubernetes API (fake-kube-api.ts, which checks every
 * request, as its own test here shows).
 */
import 'reflect-metadata';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { KubeDiskBindings } from '../../../src/adapters/kubernetes/disk-bindings.js';
import { DISK_BINDING_OWNER_LABEL, diskBindingOwnerLabel } from '../../../src/adapters/kubernetes/names.js';
import { rejectionOf, useFakeKubeApis } from './kube-api-fixture.js';

const startApi = useFakeKubeApis();

describe('the simulated Kubernetes API checks what it is sent', () => {
  it('refuses a bootstrap token Secret without usages and an apply without field manager', async () => {
    const { api, kubeconfigPath } = await startApi();
    const kc = loadKubeConfig(kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const b64 = (v: string) => Buffer.from(v).toString('base64');
    await expect(
      core.createNamespacedSecret({
        namespace: 'kube-system',
        body: {
          metadata: { name: 'bootstrap-token-abcdef' },
          type: 'bootstrap.kubernetes.io/token',
          data: { 'token-id': b64('abcdef'), 'token-secret': b64('0123456789abcdef') },
        },
      }),
    ).rejects.toThrow(/400/);
    const custom = kc.makeApiClient(CustomObjectsApi);
    await expect(
      custom.patchClusterCustomObject(
        {
          group: 'update.edgeless.systems',
          version: 'v1alpha1',
          plural: 'joiningnodes',
          name: 'w',
          body: {},
        },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      ),
    ).rejects.toThrow(/400/);
    expect(api.violations).toEqual([
      expect.stringMatching(
        /^bootstrap token Secret: not a v1 Secret, keys .*, expiration not RFC 3339, usages, auth-extra-groups$/,
      ),
      expect.stringMatching(
        /^JoiningNode apply: not a v1alpha1 JoiningNode, .*server-side apply without fieldManager$/,
      ),
    ]);
    api.violations.length = 0;
  });
});

describe('loadKubeConfig', () => {
  it('names a missing kubeconfig file', () => {
    expect(() => loadKubeConfig('/nonexistent/kubeconfig')).toThrow(
      /loading Kubernetes client configuration from \/nonexistent\/kubeconfig/,
    );
  });

  it('refuses in-cluster configuration outside a pod', () => {
    const saved = process.env.KUBERNETES_SERVICE_HOST;
    delete process.env.KUBERNETES_SERVICE_HOST;
    try {
      expect(() => loadKubeConfig()).toThrow(/not running in a pod/);
    } finally {
      if (saved !== undefined) process.env.KUBERNETES_SERVICE_HOST = saved;
    }
  });
});

describe('KubeDiskBindings against a simulated Kubernetes API', () => {
  const UUID = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';
  const PATH = `/apis/confboot.dev/v1alpha1/diskbindings`;
  async function bindings() {
    const { api, kubeconfigPath } = await startApi();
    return { api, b: new KubeDiskBindings({ kubeConfig: loadKubeConfig(kubeconfigPath) }) };
  }

  it('creates a DiskBinding for a new disk and returns the existing one afterwards (first writer wins)', async () => {
    const { api, b } = await bindings();
    const mine = { diskUuid: UUID.toUpperCase(), nodeName: 'worker-1', owner: 'instance/worker-1' };
    expect(await b.bind(mine)).toEqual({ ...mine, diskUuid: UUID });
    expect(api.diskBindings.get(`disk-${UUID}`)).toEqual({
      apiVersion: 'confboot.dev/v1alpha1',
      kind: 'DiskBinding',
      metadata: {
        // Set by the API server, as a real one does.
        creationTimestamp: expect.any(String),
        name: `disk-${UUID}`,
        labels: { [DISK_BINDING_OWNER_LABEL]: diskBindingOwnerLabel('instance/worker-1') },
      },
      spec: { diskUUID: UUID, nodeName: 'worker-1', owner: 'instance/worker-1' },
    });
    const theirs = { diskUuid: UUID, nodeName: 'worker-2', owner: 'instance/worker-2' };
    expect(await b.bind(theirs)).toEqual({
      diskUuid: UUID,
      nodeName: 'worker-1',
      owner: 'instance/worker-1',
    });
    expect(api.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      `POST ${PATH}`,
      `POST ${PATH}`,
      `GET ${PATH}/disk-${UUID}`,
    ]);
  });

  it('fails closed: an API error on create or read, or a malformed record, rejects', async () => {
    const { api, b } = await bindings();
    const mine = { diskUuid: UUID, nodeName: 'worker-1', owner: 'instance/worker-1' };
    api.failNext.push({ method: 'POST', status: 503 });
    expect((await rejectionOf(b.bind(mine))).code).toBe('unavailable');
    api.failNext.push({ method: 'POST', status: 403 });
    expect((await rejectionOf(b.bind(mine))).message).toMatch(/^creating DiskBinding disk-.*HTTP 403/);
    await b.bind(mine);
    api.failNext.push({ method: 'GET', status: 500 });
    const err = await rejectionOf(b.bind({ ...mine, owner: 'instance/worker-2' }));
    expect(err.code).toBe('unavailable');
    expect(err.message).toMatch(/^reading DiskBinding disk-/);
    api.diskBindings.set(`disk-${UUID}`, { metadata: { name: `disk-${UUID}` }, spec: { diskUUID: UUID } });
    expect((await rejectionOf(b.bind(mine))).message).toMatch(/spec is not \{diskUUID/);
  });

  it("releaseOthers deletes only the owners' bindings other than the kept disk, page by page", async () => {
    const { api, b } = await bindings();
    const uuid = (i: number) => `00000000-0000-0000-0000-${String(i).padStart(12, '0')}`;
    // 60 disks of one instance (one recorded by name before IDs: its legacy owner), one of another.
    for (let i = 0; i < 60; i++)
      await b.bind({
        diskUuid: uuid(i),
        nodeName: 'worker-1',
        owner: i === 7 ? 'instance/worker-1' : 'instance-id/1',
      });
    await b.bind({ diskUuid: uuid(99), nodeName: 'worker-2', owner: 'instance-id/2' });
    api.requests.length = 0;
    const released = await b.releaseOthers(['instance-id/1', 'instance/worker-1'], uuid(3).toUpperCase());
    expect(released.map((r) => r.diskUuid).sort()).toEqual(
      Array.from({ length: 60 }, (_, i) => uuid(i)).filter((u) => u !== uuid(3)),
    );
    expect([...api.diskBindings.keys()].sort()).toEqual([`disk-${uuid(3)}`, `disk-${uuid(99)}`]);
    const lists = api.requests.filter((r) => r.method === 'GET');
    expect(lists).toHaveLength(2); // 50 per page
    expect(api.requests.filter((r: { method: string }) => r.method === 'DELETE')).toHaveLength(59);
    // Nothing left to release; an owner with no bindings releases nothing.
    expect(await b.releaseOthers(['instance-id/1'], uuid(3))).toEqual([]);
    expect(await b.releaseOthers([], uuid(3))).toEqual([]);
  });

  it('releaseOthers trusts the spec, not the label: a binding whose label lies about its owner stays', async () => {
    const { api, b } = await bindings();
    await b.bind({ diskUuid: UUID, nodeName: 'worker-2', owner: 'instance-id/2' });
    const stored = api.diskBindings.get(`disk-${UUID}`) as { metadata: { labels: Record<string, string> } };
    stored.metadata.labels[DISK_BINDING_OWNER_LABEL] = diskBindingOwnerLabel('instance-id/1');
    expect(await b.releaseOthers(['instance-id/1'], '00000000-0000-0000-0000-000000000001')).toEqual([]);
    expect(api.diskBindings.has(`disk-${UUID}`)).toBe(true);
  });

  it('releaseOthers rejects when the list fails, and a binding deleted meanwhile (404) is skipped', async () => {
    const { api, b } = await bindings();
    await b.bind({ diskUuid: UUID, nodeName: 'worker-1', owner: 'instance-id/1' });
    api.failNext.push({ method: 'GET', status: 503 });
    const err = await rejectionOf(b.releaseOthers(['instance-id/1'], '00000000-0000-0000-0000-000000000001'));
    expect(err.code).toBe('unavailable');
    expect(err.message).toMatch(/^listing DiskBindings/);
    api.failNext.push({ method: 'DELETE', status: 404 });
    expect(await b.releaseOthers(['instance-id/1'], '00000000-0000-0000-0000-000000000001')).toEqual([]);
  });

  it('an unreachable API server rejects with unavailable', async () => {
    const { api, kubeconfigPath } = await startApi();
    await api.close();
    const b = new KubeDiskBindings({ kubeConfig: loadKubeConfig(kubeconfigPath) });
    expect((await rejectionOf(b.bind({ diskUuid: UUID, nodeName: 'w', owner: 'instance/w' }))).code).toBe(
      'unavailable',
    );
  });
});
