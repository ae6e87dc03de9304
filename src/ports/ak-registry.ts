import type { CallOptions } from './types.js';

/** The attestation key registered for the attester of one validation. */
export interface RegisteredAk {
  /** Who the attester is, for messages (e.g. `worker-1 (10.42.0.12)`). */
  attester: string;
  /** Its AK public area (TPMT_PUBLIC); undefined when none is registered (the document is refused). */
  akPub: Uint8Array | undefined;
}

/**
 * Where registered attestation keys come from: the qemu-vtpm validator with AK trust on accepts only
 * the key registered for the machine calling, the way GCE publishes a shielded VM's identity.
 */
export interface AkRegistry {
  /**
   * The AK registered for the attester of this validation. A registry that serves many machines
   * tells them apart by `options.peerAddress` (the caller's address, given by the attested TLS
   * server) and registers nothing for a call without one.
   */
  registeredAk(options?: CallOptions): Promise<RegisteredAk>;
}

/** DI token for {@link AkRegistry}. */
export const AkRegistry = Symbol.for('confboot.AkRegistry');
