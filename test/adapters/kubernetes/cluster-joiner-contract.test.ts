/** The ClusterJoiner contract against the in-memory fake (reference) and KubeadmJoiner running the SIMULATED kubeadm. */
import { KubeadmJoiner } from '../../../src/adapters/kubernetes/kubeadm.js';
import { describeClusterJoinerContract } from '../../contract/cluster-joiner.js';
import { FakeClusterJoiner } from '../../fakes/fake-cluster-joiner.js';
import { FAKE_KUBEADM, FakeKubeadmWorld } from './fake-kubeadm.js';

describeClusterJoinerContract('FakeClusterJoiner (in-memory reference)', async () => {
  const subject = new FakeClusterJoiner();
  return {
    subject,
    seed: {
      failTransiently: async (n) => subject.failTransiently(n),
      joined: async () =>
        subject.joined.map((a) => ({
          nodeName: a.nodeName,
          controlPlane: a.role === 'ControlPlane',
          apiServerEndpoint: a.apiServerEndpoint,
        })),
    },
    cleanup: async () => {},
    supports: { transientFailures: true },
  };
});

describeClusterJoinerContract('KubeadmJoiner with a simulated kubeadm (fake executable)', async () => {
  const world = new FakeKubeadmWorld();
  const subject = new KubeadmJoiner({
    kubeadmPath: FAKE_KUBEADM,
    env: world.env,
    tmpDir: world.dir,
    timeoutInMs: 20_000,
  });
  return {
    subject,
    seed: {
      failTransiently: async (n) => world.failTimes(n),
      joined: async () =>
        world
          .invocations()
          .filter((i) => i.subcommand === 'join' && i.outcome === 'ok')
          .map((i) => {
            const doc = i.documents?.[0] ?? {};
            return {
              nodeName: doc.nodeRegistration?.name,
              controlPlane: doc.controlPlane !== undefined,
              apiServerEndpoint: doc.discovery?.bootstrapToken?.apiServerEndpoint,
            };
          }),
    },
    cleanup: async () => world.cleanup(),
    supports: { transientFailures: true },
  };
});
