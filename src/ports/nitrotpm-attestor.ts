import type { CallOptions } from './types.js';

/** What an EC2 instance asks its NitroTPM to have AWS sign. */
export interface NitroTpmAttestationRequest {
  /** Bound as the document's `nonce` (at most 512 bytes). */
  nonce: Uint8Array;
  /** Bound as the document's `public_key`: the TPM attestation key's SubjectPublicKeyInfo (DER). */
  publicKey: Uint8Array;
  /** Bound as the document's `user_data` (at most 512 bytes); default none. */
  userData?: Uint8Array;
}

/**
 * Asks the Nitro system (through the NitroTPM's vendor command, as AWS's `nitro-tpm-attest` does) for
 * an AWS-signed NitroTPM attestation document: a CBOR COSE_Sign1 holding the instance's SHA-384
 * PCRs and the request's nonce, user data and public key. Used by the aws-nitro-tpm issuer.
 */
export interface NitroTpmAttestor {
  /**
   * Returns the document's bytes. Rejects when the TPM is not a NitroTPM or the Nitro system refuses
   * the request.
   */
  attestationDocument(request: NitroTpmAttestationRequest, options?: CallOptions): Promise<Uint8Array>;
}

/** DI token for {@link NitroTpmAttestor}. */
export const NitroTpmAttestor = Symbol.for('confboot.NitroTpmAttestor');
