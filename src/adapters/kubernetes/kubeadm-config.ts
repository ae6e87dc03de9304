/**
 * Renders kubeadm's v1beta4 configuration for `kubeadm join` and `kubeadm init` (the
 * last step of a join and of the first control plane's init) with the `yaml` package, so no value
 * can break out of its field. Pure functions:
 * the runner in kubeadm.ts writes the result to a private file.
 */
import { stringify } from 'yaml';
import type { InitClusterArgs } from '../../ports/cluster-initializer.js';
import type { JoinClusterArgs } from '../../ports/cluster-joiner.js';
import { ConfbootError } from '../../ports/errors.js';

/** kubeadm's configuration API version. */
export const KUBEADM_API_VERSION = 'kubeadm.k8s.io/v1beta4';
/** Port of the Kubernetes API server (upstream `KubernetesPort`). */
export const KUBERNETES_API_PORT = 6443;

/** One v1beta4 extra argument (`--name=value`), the list form that replaced v1beta3's map. */
export interface KubeadmArg {
  name: string;
  value: string;
}

/** Settings of this machine that are not part of the join or init request. */
export interface KubeadmRenderOptions {
  /** Extra kubelet flags appended after confboot's own (node-ip, TLS files). */
  kubeletExtraArgs?: KubeadmArg[];
  /** CRI socket, e.g. `unix:///run/containerd/containerd.sock`; kubeadm detects it when unset. */
  criSocket?: string;
}

/** Settings for `kubeadm init` beyond {@link InitClusterArgs}. */
export interface KubeadmInitRenderOptions extends KubeadmRenderOptions {
  /** Shared endpoint of all control planes (`host:port`, e.g. a load balancer); kubeadm uses this node when unset. */
  controlPlaneEndpoint?: string;
  /** Where kubeadm writes the cluster's pki (kubeadm default `/etc/kubernetes/pki`). */
  certificatesDir?: string;
  /** Key type of the cluster's certificates (v1beta4 `encryptionAlgorithm`, e.g. `ECDSA-P256`); kubeadm default RSA-2048. */
  encryptionAlgorithm?: 'RSA-2048' | 'RSA-3072' | 'RSA-4096' | 'ECDSA-P256' | 'ECDSA-P384';
}

function nodeRegistration(
  nodeName: string,
  nodeIp: string,
  ownArgs: KubeadmArg[],
  options: KubeadmRenderOptions,
): Record<string, unknown> {
  const args = [
    ...(nodeIp === '' ? [] : [{ name: 'node-ip', value: nodeIp }]),
    ...ownArgs,
    ...(options.kubeletExtraArgs ?? []),
  ];
  return {
    name: nodeName,
    ...(options.criSocket ? { criSocket: options.criSocket } : {}),
    ...(args.length > 0 ? { kubeletExtraArgs: args } : {}),
  };
}

/**
 * The JoinConfiguration for {@link JoinClusterArgs}: bootstrap-token discovery pinned to the CA
 * hash, the node's name and IP, the kubelet's certificate from the join ticket, and for a control
 * plane the local API endpoint. Kubernetes version and components are not part of a kubeadm join
 * configuration (kubeadm takes the version from the cluster; components are installed beforehand).
 * @throws ConfbootError `invalid-argument` for an unknown role or a control plane without an IP.
 */
export function renderJoinConfiguration(args: JoinClusterArgs, options: KubeadmRenderOptions = {}): string {
  if (args.role !== 'ControlPlane' && args.role !== 'Worker')
    throw new ConfbootError(
      'invalid-argument',
      `rendering kubeadm join configuration: role "${args.role}" cannot join`,
    );
  if (args.role === 'ControlPlane' && args.nodeIp === '')
    throw new ConfbootError(
      'invalid-argument',
      'rendering kubeadm join configuration: a control plane needs its node IP to advertise the API server',
    );
  const kubeletTls: KubeadmArg[] = [
    { name: 'tls-cert-file', value: args.kubeletCertPath },
    { name: 'tls-private-key-file', value: args.kubeletKeyPath },
  ].filter((a) => a.value !== '');
  const doc = {
    apiVersion: KUBEADM_API_VERSION,
    kind: 'JoinConfiguration',
    nodeRegistration: nodeRegistration(args.nodeName, args.nodeIp, kubeletTls, options),
    discovery: {
      bootstrapToken: {
        apiServerEndpoint: args.apiServerEndpoint,
        token: args.token,
        caCertHashes: [args.discoveryTokenCaCertHash],
      },
    },
    ...(args.role === 'ControlPlane'
      ? {
          controlPlane: {
            localAPIEndpoint: { advertiseAddress: args.nodeIp, bindPort: KUBERNETES_API_PORT },
          },
        }
      : {}),
  };
  return stringify(doc);
}

/**
 * The InitConfiguration and ClusterConfiguration for {@link InitClusterArgs}: this node's name and
 * API endpoint, the cluster name, Kubernetes version, service subnet and API server SANs. Conformance
 * mode and components do not change kubeadm's configuration (upstream applies them around kubeadm).
 */
export function renderInitConfiguration(
  args: InitClusterArgs,
  options: KubeadmInitRenderOptions = {},
): string {
  const init = {
    apiVersion: KUBEADM_API_VERSION,
    kind: 'InitConfiguration',
    nodeRegistration: nodeRegistration(
      args.nodeName,
      args.nodeIp,
      args.providerId ? [{ name: 'provider-id', value: args.providerId }] : [],
      options,
    ),
    ...(args.nodeIp === ''
      ? {}
      : { localAPIEndpoint: { advertiseAddress: args.nodeIp, bindPort: KUBERNETES_API_PORT } }),
  };
  const sans = [...new Set(args.apiserverCertSans.filter((s) => s !== ''))];
  const cluster = {
    apiVersion: KUBEADM_API_VERSION,
    kind: 'ClusterConfiguration',
    ...(args.clusterName === '' ? {} : { clusterName: args.clusterName }),
    ...(args.kubernetesVersion === '' ? {} : { kubernetesVersion: args.kubernetesVersion }),
    ...((args.controlPlaneEndpoint ?? options.controlPlaneEndpoint)
      ? { controlPlaneEndpoint: args.controlPlaneEndpoint ?? options.controlPlaneEndpoint }
      : {}),
    ...(args.serviceCidr === '' ? {} : { networking: { serviceSubnet: args.serviceCidr } }),
    ...(sans.length === 0 ? {} : { apiServer: { certSANs: sans } }),
    ...(options.certificatesDir ? { certificatesDir: options.certificatesDir } : {}),
    ...(options.encryptionAlgorithm ? { encryptionAlgorithm: options.encryptionAlgorithm } : {}),
  };
  return `${stringify(init)}---\n${stringify(cluster)}`;
}
