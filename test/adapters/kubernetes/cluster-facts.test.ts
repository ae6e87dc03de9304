/**
 * KubeClusterFacts (components behind the NodeVersion, JoiningNode records) through the real
 * @kubernetes/client-node against a SIMULATED Kubernetes API (fake-kube-api.ts, which checks every
 * request).
 */
import 'reflect-metadata';
import { describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { KubeClusterFacts } from '../../../src/adapters/kubernetes/cluster-facts.js';
import { normalizeNodeName } from '../../../src/ports/kubernetes-node.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { rejectionOf, START as start, useFakeKubeApis } from './kube-api-fixture.js';

const startApi = useFakeKubeApis();
const COMPONENTS = [
  {
    url: 'https://example.com/kubelet',
    hash: 'sha256:aa',
    install_path: '/run/state/bin/kubelet',
    extract: false,
  },
  { url: 'https://example.com/cni.tgz', hash: 'sha256:bb', install_path: '/opt/cni/bin', extract: true },
];

describe('KubeClusterFacts against a simulated Kubernetes API', () => {
  async function facts() {
    const { api, kubeconfigPath } = await startApi();
    const clock = new FakeClock(start);
    return { api, clock, facts: new KubeClusterFacts({ kubeConfig: loadKubeConfig(kubeconfigPath), clock }) };
  }

  it('reads the components from the ConfigMap the NodeVersion references', async () => {
    const { api, facts: f } = await facts();
    api.seedComponents('k8s-components-sha256-abc', COMPONENTS);
    expect(await f.components()).toEqual([
      {
        url: 'https://example.com/kubelet',
        hash: 'sha256:aa',
        installPath: '/run/state/bin/kubelet',
        extract: false,
      },
      { url: 'https://example.com/cni.tgz', hash: 'sha256:bb', installPath: '/opt/cni/bin', extract: true },
    ]);
    expect(api.requests.map((r) => `${r.method} ${r.path}`)).toEqual([
      'GET /apis/update.edgeless.systems/v1alpha1/nodeversions/constellation-version',
      'GET /api/v1/namespaces/kube-system/configmaps/k8s-components-sha256-abc',
    ]);
  });

  it('accepts components with omitted (Go omitempty) fields', async () => {
    const { api, facts: f } = await facts();
    api.seedComponents('c', [{ url: 'https://x', hash: 'sha256:1' }]);
    expect(await f.components()).toEqual([
      { url: 'https://x', hash: 'sha256:1', installPath: '', extract: false },
    ]);
  });

  it.each([
    ['not JSON', '{', /not JSON/],
    ['not a list', '{}', /not a JSON list/],
    ['a component with a numeric URL', [{ url: 1 }], /component 0: "url" is not a string/],
    ['a component that is not an object', ['x'], /component 0 is not/],
  ])('refuses a components value that is %s', async (_n, value, message) => {
    const { api, facts: f } = await facts();
    api.seedComponents('c', value);
    await expect(f.components()).rejects.toThrow(message);
  });

  it('says which object is missing', async () => {
    const { api, facts: f } = await facts();
    const err = await rejectionOf(f.components());
    expect(err.code).toBe('failed-precondition');
    expect(err.message).toMatch(/^reading NodeVersion constellation-version: HTTP 404/);
    api.seedComponents('gone', []);
    api.configMaps.clear();
    expect((await rejectionOf(f.components())).message).toMatch(
      /^reading components from ConfigMap kube-system\/gone: HTTP 404/,
    );
  });

  it('applies a worker’s JoiningNode server-side with deadline now+48h', async () => {
    const { api, facts: f } = await facts();
    api.seedComponents('k8s-components-1', []);
    await f.addJoiningNode('Worker_Node.europe-west3-b.c.proj.internal', false);
    const name = 'worker-node.europe-west3-b.c.proj.internal';
    const patch = api.requests.find((r) => r.method === 'PATCH');
    expect(patch?.path).toBe(`/apis/update.edgeless.systems/v1alpha1/joiningnodes/${name}`);
    expect(patch?.contentType).toBe('application/apply-patch+yaml');
    expect(patch?.query).toEqual({ fieldManager: 'join-service' });
    expect(api.joiningNodes.get(name)?.spec).toEqual({
      name,
      componentsreference: 'k8s-components-1',
      iscontrolplane: false,
      deadline: '2026-11-23T12:00:00Z',
    });
    await f.addJoiningNode(name, false); // apply is idempotent
  });

  it('creates the control plane’s JoiningNode as "control-plane" with deadline now+10min; a second one is refused', async () => {
    const { api, clock, facts: f } = await facts();
    api.seedComponents('k8s-components-1', []);
    await f.addJoiningNode('cp-1', true);
    expect(api.joiningNodes.get('control-plane')?.spec).toEqual({
      name: 'cp-1',
      componentsreference: 'k8s-components-1',
      iscontrolplane: true,
      deadline: '2026-11-21T12:10:00Z',
    });
    await clock.advance(60_000);
    const err = await rejectionOf(f.addJoiningNode('cp-2', true));
    expect(err.code).toBe('failed-precondition');
    expect(err.message).toBe(
      'creating JoiningNode control-plane for node cp-2: another control-plane node is already joining',
    );
  });

  it.each(['', 'test_node_', '-a', 'a..b', 'x'.repeat(254), 'ünïcode'])(
    'refuses the node name %j',
    async (name) => {
      const { api, facts: f } = await facts();
      api.seedComponents('c', []);
      const err = await rejectionOf(f.addJoiningNode(name, false));
      expect(err.code).toBe('invalid-argument');
      expect(api.requests).toEqual([]);
    },
  );

  it('normalises names as upstream does and accepts dots', () => {
    expect(normalizeNodeName('My_Node')).toBe('my-node');
    expect(normalizeNodeName('node-1.internal')).toBe('node-1.internal');
  });

  it('reports API failures while recording a joining node as unavailable', async () => {
    const { api, facts: f } = await facts();
    api.seedComponents('c', []);
    api.failNext.push({ method: 'PATCH', status: 500 });
    const err = await rejectionOf(f.addJoiningNode('w', false));
    expect(err.code).toBe('unavailable');
    expect(err.message).toBe('applying JoiningNode w: HTTP 500: simulated HTTP 500');
    expect(api.joiningNodes.size).toBe(0);
  });
});
