/** In-memory ClusterFacts: components list and JoiningNode records, one joining control plane at a time. */
import type { ClusterFacts } from '../../src/ports/cluster-facts.js';
import { ConfbootError } from '../../src/ports/errors.js';
import type { Component } from '../../src/ports/types.js';

export class FakeClusterFacts implements ClusterFacts {
  readonly joiningNodes = new Map<string, { isControlPlane: boolean }>();
  componentsError: Error | undefined;

  constructor(public componentList: Component[] = []) {}

  async components(): Promise<Component[]> {
    if (this.componentsError) throw this.componentsError;
    return this.componentList.map((c) => ({ ...c }));
  }

  async addJoiningNode(nodeName: string, isControlPlane: boolean): Promise<void> {
    const key = isControlPlane ? 'control-plane' : nodeName;
    if (isControlPlane && this.joiningNodes.has(key))
      throw new ConfbootError('failed-precondition', 'another control-plane node is already joining');
    this.joiningNodes.set(key, { isControlPlane });
  }
}
