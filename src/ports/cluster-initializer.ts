import type { CallOptions, Component } from './types.js';

/** Everything kubeadm init needs (from the init request). */
export interface InitClusterArgs {
  kubernetesVersion: string;
  clusterName: string;
  conformanceMode: boolean;
  components: Component[];
  apiserverCertSans: string[];
  serviceCidr: string;
  nodeName: string;
  nodeIp: string;
  /** Shared `host:port` of every control plane's API server (the load balancer), when the cloud has one. */
  controlPlaneEndpoint?: string;
  /** The cloud's provider ID of this node (kubelet `--provider-id`), when it has one. */
  providerId?: string;
}

/** Initialises a new cluster on this node (kubeadm init). */
export interface ClusterInitializer {
  /** Runs the init and resolves to the admin kubeconfig; rejects with the tool's output on failure. */
  initCluster(args: InitClusterArgs, options?: CallOptions): Promise<Uint8Array>;
}

/** DI token for {@link ClusterInitializer}. */
export const ClusterInitializer = Symbol.for('confboot.ClusterInitializer');
