/** ClusterInitializer that records calls and returns a kubeconfig; fails on demand. Kubernetes is simulated. */
import type { ClusterInitializer, InitClusterArgs } from '../../src/ports/cluster-initializer.js';

export class FakeClusterInitializer implements ClusterInitializer {
  readonly calls: InitClusterArgs[] = [];
  initError: Error | undefined;

  async initCluster(args: InitClusterArgs): Promise<Uint8Array> {
    this.calls.push(args);
    if (this.initError) throw this.initError;
    return new TextEncoder().encode(
      `apiVersion: v1\nkind: Config\nclusters:\n- name: ${args.clusterName}\n  cluster:\n    server: https://${args.nodeIp || '127.0.0.1'}:6443\n`,
    );
  }
}
