/** In-memory NodeStateStore: one write only, like the O_EXCL file. */
import type { NodeStateStore } from '../../src/ports/node-state-store.js';
import type { NodeState } from '../../src/ports/types.js';

export class FakeNodeStateStore implements NodeStateStore {
  state: NodeState | undefined;
  writeError: Error | undefined;

  async write(state: NodeState): Promise<void> {
    if (this.writeError) throw this.writeError;
    if (this.state) throw new Error('writing node state: file exists already');
    this.state = { role: state.role, measurementSalt: new Uint8Array(state.measurementSalt) };
  }

  async read(): Promise<NodeState | undefined> {
    return this.state;
  }
}
