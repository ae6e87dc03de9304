import type { NodeState } from './types.js';

/** Persists node state (upstream: `/run/state/constellation/node_state.json`). */
export interface NodeStateStore {
  /** Writes the state; rejects if it already exists. Never leaves a half-written file. */
  write(state: NodeState): Promise<void>;
  /** Reads the state, or undefined when none was written. */
  read(): Promise<NodeState | undefined>;
}

/** DI token for {@link NodeStateStore}. */
export const NodeStateStore = Symbol.for('confboot.NodeStateStore');
