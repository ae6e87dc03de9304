import { describe, expect, it } from 'vitest';
import { ClusterNodes } from '../../src/ports/cluster-nodes.js';

describe('ClusterNodes port', () => {
  it('has a global DI token of its own name', () => {
    expect(ClusterNodes).toBe(Symbol.for('confboot.ClusterNodes'));
  });
});
