/**
 * The node lock's marker on a vTPM. Where it sits: the bootstrapper's node lock
 * calls markBootstrapped(clusterId) once, right after taking the lock, and checks isBootstrapped()
 * on boot. TPM2_PCR_Event(15, clusterId) extends every bank with H(clusterId), so SHA-256 PCR 15
 * becomes SHA256(old ‖ SHA256(clusterId)). PCR 15 is expected all-zero and enforced by validators,
 * which is why a bootstrapped node can no longer attest as a fresh one.
 */
import { createHash } from 'node:crypto';
import { wrapError } from '../../ports/errors.js';
import type { NodeMarker } from '../../ports/node-marker.js';
import type { Tpm } from '../../ports/tpm.js';

/** The PCR that records the cluster ID. */
export const CLUSTER_ID_PCR = 15;

/**
 * SHA-256 PCR 15 after marking a node with `clusterId`: SHA256(previous ‖ SHA256(clusterId)),
 * where `previous` defaults to the reset value (32 zero bytes).
 */
export function expectedPcr15(clusterId: Uint8Array, previous: Uint8Array = new Uint8Array(32)): Uint8Array {
  const event = createHash('sha256').update(clusterId).digest();
  return new Uint8Array(createHash('sha256').update(previous).update(event).digest());
}

/** {@link NodeMarker} on PCR 15 of a TPM. */
export class Pcr15Marker implements NodeMarker {
  constructor(private readonly tpm: Pick<Tpm, 'pcrEvent' | 'readPcrs'>) {}

  async markBootstrapped(clusterId: Uint8Array): Promise<void> {
    try {
      await this.tpm.pcrEvent(CLUSTER_ID_PCR, clusterId);
    } catch (err) {
      throw wrapError('marking node as bootstrapped in PCR 15', err);
    }
  }

  async isBootstrapped(): Promise<boolean> {
    let value: Uint8Array | undefined;
    try {
      value = (await this.tpm.readPcrs([CLUSTER_ID_PCR])).get(CLUSTER_ID_PCR);
    } catch (err) {
      throw wrapError('checking whether the node is bootstrapped (PCR 15)', err);
    }
    if (!value)
      throw wrapError('checking whether the node is bootstrapped', new Error('the TPM returned no PCR 15'));
    return value.some((b) => b !== 0);
  }
}
