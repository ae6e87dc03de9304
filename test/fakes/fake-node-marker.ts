/** In-memory NodeMarker with the real PCR 15 arithmetic: PCR15 = SHA256(old ‖ SHA256(clusterId)). */
import { createHash } from 'node:crypto';
import type { NodeMarker } from '../../src/ports/node-marker.js';

export class FakeNodeMarker implements NodeMarker {
  pcr15 = new Uint8Array(32);
  readonly marks: Uint8Array[] = [];
  /** Set to make the next markBootstrapped fail (after recording the call). */
  markError: Error | undefined;

  async markBootstrapped(clusterId: Uint8Array): Promise<void> {
    this.marks.push(clusterId);
    if (this.markError) throw this.markError;
    const digest = createHash('sha256').update(clusterId).digest();
    this.pcr15 = new Uint8Array(createHash('sha256').update(this.pcr15).update(digest).digest());
  }

  async isBootstrapped(): Promise<boolean> {
    return this.pcr15.some((b) => b !== 0);
  }
}
