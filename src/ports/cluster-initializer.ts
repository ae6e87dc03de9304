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
}

/** Initialises a new cluster on this node (kubeadm init). */
export interface ClusterInitializer {
  /** Runs the init and resolves to the admin kubeconfig; rejects with the tool's output on failure. */
  initCluster(args: InitClusterArgs, options?: CallOptions): Promise<Uint8Array>;
}

/** DI token for {@link ClusterInitializer}. */
export const ClusterInitializer = Symbol.for('confboot.ClusterInitializer');
