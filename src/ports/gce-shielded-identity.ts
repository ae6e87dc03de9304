import type { CallOptions } from './types.js';

/**
 * Reads a GCE instance's shielded instance identity (upstream:
 * `instances.getShieldedInstanceIdentity(project, zone, instance)`). The gcp-sev-es validator trusts
 * the attestation key it names.
 */
export interface GceShieldedIdentity {
  /**
   * Returns `signingKey.ekPub` of the instance: a PEM "PUBLIC KEY" of its attestation key. Rejects
   * when the instance does not exist, has no signing key, or the API cannot be reached.
   */
  signingKeyPem(project: string, zone: string, instance: string, options?: CallOptions): Promise<string>;
}

/** DI token for {@link GceShieldedIdentity}. */
export const GceShieldedIdentity = Symbol.for('confboot.GceShieldedIdentity');
