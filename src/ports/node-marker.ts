/** Marks a node as bootstrapped, one way (vTPM: PCR 15 is extended with the cluster ID). */
export interface NodeMarker {
  /** Records `clusterId` in the node's measurements. Called at most once per boot by the node lock. */
  markBootstrapped(clusterId: Uint8Array): Promise<void>;
  /** True when the node was already marked (PCR 15 non-zero). */
  isBootstrapped(): Promise<boolean>;
}

/** DI token for {@link NodeMarker}. */
export const NodeMarker = Symbol.for('confboot.NodeMarker');
