import { describe, expect, it } from 'vitest';
import { ClusterSnapshotSource } from '../../src/ports/cluster-status.js';

describe('ClusterSnapshotSource port', () => {
  it('has a global DI token of its own name', () => {
    expect(ClusterSnapshotSource).toBe(Symbol.for('confboot.ClusterSnapshotSource'));
  });
});
