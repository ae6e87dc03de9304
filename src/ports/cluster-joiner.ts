import type { CallOptions, Component, Role } from './types.js';

/** Everything kubeadm needs to join this node (from the join ticket and metadata). */
export interface JoinClusterArgs {
  /** `<host>:<port>` of the Kubernetes API. */
  apiServerEndpoint: string;
  /** kubeadm bootstrap token. Secret. */
  token: string;
  /** `sha256:<hex>` discovery hash. */
  discoveryTokenCaCertHash: string;
  nodeName: string;
  /** The node's VPC IP; may be empty. */
  nodeIp: string;
  role: Role;
  kubernetesVersion: string;
  components: Component[];
  /** Where the kubelet client certificate and key were written. */
  kubeletCertPath: string;
  kubeletKeyPath: string;
}

/** Joins this node to the cluster (kubeadm join). */
export interface ClusterJoiner {
  /** Runs the join; rejects with the tool's output on failure. */
  joinCluster(args: JoinClusterArgs, options?: CallOptions): Promise<void>;
}

/** DI token for {@link ClusterJoiner}. */
export const ClusterJoiner = Symbol.for('confboot.ClusterJoiner');
