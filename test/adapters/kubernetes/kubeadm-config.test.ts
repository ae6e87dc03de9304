/**
 * The kubeadm configuration files confboot writes (kubeadm.k8s.io/v1beta4), read back as YAML: a
 * worker's and a control plane's JoinConfiguration (node IP and kubelet TLS files as kubelet args,
 * the discovery pin, the control plane's advertise address), the refusals, and the init
 * configuration's two documents with only the settings given.
 */
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import {
  KUBEADM_API_VERSION,
  renderInitConfiguration,
  renderJoinConfiguration,
} from '../../../src/adapters/kubernetes/kubeadm-config.js';
import type { JoinClusterArgs } from '../../../src/ports/cluster-joiner.js';

const JOIN: JoinClusterArgs = {
  apiServerEndpoint: '10.0.0.1:6443',
  token: 'abcdef.0123456789abcdef',
  discoveryTokenCaCertHash: `sha256:${'ab'.repeat(32)}`,
  nodeName: 'worker-0',
  nodeIp: '10.0.0.7',
  role: 'Worker',
  kubernetesVersion: 'v1.31.1',
  components: [],
  kubeletCertPath: '/run/state/kubelet/pki/kubelet-client-crt.pem',
  kubeletKeyPath: '/run/state/kubelet/pki/kubelet-client-key.pem',
};

describe('renderJoinConfiguration', () => {
  it("writes a worker's JoinConfiguration", () => {
    expect(
      parse(renderJoinConfiguration(JOIN, { criSocket: 'unix:///run/containerd/containerd.sock' })),
    ).toEqual({
      apiVersion: KUBEADM_API_VERSION,
      kind: 'JoinConfiguration',
      nodeRegistration: {
        name: 'worker-0',
        criSocket: 'unix:///run/containerd/containerd.sock',
        kubeletExtraArgs: [
          { name: 'node-ip', value: '10.0.0.7' },
          { name: 'tls-cert-file', value: JOIN.kubeletCertPath },
          { name: 'tls-private-key-file', value: JOIN.kubeletKeyPath },
        ],
      },
      discovery: {
        bootstrapToken: {
          apiServerEndpoint: '10.0.0.1:6443',
          token: 'abcdef.0123456789abcdef',
          caCertHashes: [JOIN.discoveryTokenCaCertHash],
        },
      },
    });
  });

  it('advertises a control plane on its node IP and port 6443, extra kubelet args last', () => {
    const doc = parse(
      renderJoinConfiguration(
        { ...JOIN, role: 'ControlPlane', kubeletCertPath: '', kubeletKeyPath: '' },
        { kubeletExtraArgs: [{ name: 'v', value: '2' }] },
      ),
    );
    expect(doc.controlPlane).toEqual({ localAPIEndpoint: { advertiseAddress: '10.0.0.7', bindPort: 6443 } });
    expect(doc.nodeRegistration.kubeletExtraArgs).toEqual([
      { name: 'node-ip', value: '10.0.0.7' },
      { name: 'v', value: '2' },
    ]);
  });

  it.each([
    ['a role that cannot join', { role: 'Unknown' }, 'role "Unknown" cannot join'],
    [
      'a control plane without node IP',
      { role: 'ControlPlane', nodeIp: '' },
      'a control plane needs its node IP',
    ],
  ] as const)('refuses %s', (_n, change, message) => {
    expect(() => renderJoinConfiguration({ ...JOIN, ...change } as JoinClusterArgs)).toThrow(
      expect.objectContaining({ code: 'invalid-argument', message: expect.stringContaining(message) }),
    );
  });
});

describe('renderInitConfiguration', () => {
  const INIT = {
    kubernetesVersion: 'v1.31.1',
    clusterName: 'confboot',
    conformanceMode: false,
    components: [],
    apiserverCertSans: ['10.0.0.1', '', '10.0.0.1', 'api.example'],
    serviceCidr: '10.96.0.0/12',
    nodeName: 'control-plane-0',
    nodeIp: '10.0.0.1',
    providerId: 'gce://p/z/control-plane-0',
  };

  it('writes InitConfiguration and ClusterConfiguration with the SANs once each', () => {
    const docs = parseAllDocuments(renderInitConfiguration(INIT, { encryptionAlgorithm: 'ECDSA-P256' })).map(
      (d) => d.toJS(),
    );
    expect(docs).toEqual([
      {
        apiVersion: KUBEADM_API_VERSION,
        kind: 'InitConfiguration',
        nodeRegistration: {
          name: 'control-plane-0',
          kubeletExtraArgs: [
            { name: 'node-ip', value: '10.0.0.1' },
            { name: 'provider-id', value: 'gce://p/z/control-plane-0' },
          ],
        },
        localAPIEndpoint: { advertiseAddress: '10.0.0.1', bindPort: 6443 },
      },
      {
        apiVersion: KUBEADM_API_VERSION,
        kind: 'ClusterConfiguration',
        clusterName: 'confboot',
        kubernetesVersion: 'v1.31.1',
        networking: { serviceSubnet: '10.96.0.0/12' },
        apiServer: { certSANs: ['10.0.0.1', 'api.example'] },
        encryptionAlgorithm: 'ECDSA-P256',
      },
    ]);
  });

  it('leaves out what is not given; the args’ control-plane endpoint wins over the option', () => {
    const bare = {
      ...INIT,
      clusterName: '',
      kubernetesVersion: '',
      serviceCidr: '',
      apiserverCertSans: [],
      nodeIp: '',
    };
    const [init, cluster] = parseAllDocuments(
      renderInitConfiguration(
        { ...bare, controlPlaneEndpoint: 'lb:6443' },
        { controlPlaneEndpoint: 'other:6443' },
      ),
    ).map((d) => d.toJS());
    expect(init).not.toHaveProperty('localAPIEndpoint');
    expect(cluster).toEqual({
      apiVersion: KUBEADM_API_VERSION,
      kind: 'ClusterConfiguration',
      controlPlaneEndpoint: 'lb:6443',
    });
  });
});
