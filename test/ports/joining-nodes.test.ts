import { describe, expect, it } from 'vitest';
import { JoiningNodes } from '../../src/ports/joining-nodes.js';

describe('JoiningNodes port', () => {
  it('has a global DI token of its own name', () => {
    expect(JoiningNodes).toBe(Symbol.for('confboot.JoiningNodes'));
  });
});
