import type { KubeletCredentialsGrant } from './joining-nodes.js';
import type { Component } from './types.js';

/** Facts the join service reads from and records in the Kubernetes API (components, JoiningNodes). */
export interface ClusterFacts {
  /** The components from the ConfigMap referenced by the NodeVersion resource. */
  components(): Promise<Component[]>;
  /**
   * Records a joining node (the JoiningNode resource). Rejects with `failed-precondition` when another
   * control plane is already joining. `grant` names the bootstrap token and kubelet key the node's
   * client CSR must use (the node operator approves only that CSR).
   */
  addJoiningNode(nodeName: string, isControlPlane: boolean, grant?: KubeletCredentialsGrant): Promise<void>;
}

/** DI token for {@link ClusterFacts}. */
export const ClusterFacts = Symbol.for('confboot.ClusterFacts');
