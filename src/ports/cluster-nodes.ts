import type { CallOptions } from './types.js';

/** One Node of the cluster. */
export interface ClusterNode {
  name: string;
  /** Whether its `Ready` condition is `True`. */
  ready: boolean;
  /**
   * The `Ready` condition's `lastHeartbeatTime`, when it has one: when a kubelet last posted it.
   * A Node stays `Ready=True` for the node-monitor grace period (40 s) after its kubelet stopped.
   */
  readyHeartbeat?: Date;
}

/** The cluster's Node objects, read by the node operator. */
export interface ClusterNodes {
  /** Every Node. Rejects (usually `unavailable`) when they cannot be read. */
  list(options?: CallOptions): Promise<ClusterNode[]>;
}

/** DI token for {@link ClusterNodes}. */
export const ClusterNodes = Symbol.for('confboot.ClusterNodes');
