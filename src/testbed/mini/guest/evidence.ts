/**
 * The one evidence quote a mini VM makes for the host outside the production flow: before the
 * bootstrapper starts, one qemu-vtpm document (carrying the firmware event log) for the nonce the
 * host committed to before boot (in the fw_cfg config, like the initial passphrase), so the host can
 * replay the log against the quoted PCRs.
 *
 * The agent quotes for nothing else: the user data is fixed to {@link EVIDENCE_USER_DATA}, never
 * chosen by the host, so the document can never stand in for an attested TLS handshake (there the
 * user data is SHA-256 of the TLS key, and the quote binds SHA256(userData ‖ nonce)); the nonce must
 * be exactly the committed 32 bytes; and the gate issues at most once per boot and never after it
 * was closed (the agent closes it before starting the bootstrapper).
 */
import { createHash } from 'node:crypto';
import type { Issuer } from '../../../ports/issuer.js';

/** The user data of every mini evidence quote: SHA-256 of a fixed label. */
export const EVIDENCE_USER_DATA: Uint8Array = new Uint8Array(
  createHash('sha256').update('confboot-mini boot evidence v1').digest(),
);

/** Length of the committed nonce in bytes. */
export const EVIDENCE_NONCE_BYTES = 32;

/** Issues the one evidence document of this boot; see the module comment. */
export class EvidenceGate {
  private state: 'open' | 'issued' | 'closed' = 'open';
  private readonly nonce: Buffer;

  /** `committedNonceHex`: the nonce from the host's pre-boot config, 64 hex digits. */
  constructor(committedNonceHex: string) {
    if (!new RegExp(`^[0-9a-f]{${EVIDENCE_NONCE_BYTES * 2}}$`).test(committedNonceHex))
      throw new Error(`the evidence nonce must be ${EVIDENCE_NONCE_BYTES} bytes as lower-case hex`);
    this.nonce = Buffer.from(committedNonceHex, 'hex');
  }

  /**
   * The document for `requestedNonce`, which must be the committed one; refused when this boot's
   * document was already issued, or after {@link close}.
   */
  async issue(issuer: Pick<Issuer, 'issue'>, requestedNonce: Uint8Array): Promise<Uint8Array> {
    if (this.state === 'closed')
      throw new Error('refused to quote: evidence is given only before the bootstrapper starts');
    if (this.state === 'issued')
      throw new Error('refused to quote: this boot already gave its one evidence quote');
    if (!this.nonce.equals(Buffer.from(requestedNonce)))
      throw new Error('refused to quote: the nonce is not the one the host committed to before boot');
    this.state = 'issued';
    return issuer.issue(EVIDENCE_USER_DATA, new Uint8Array(this.nonce));
  }

  /** No evidence quote after this (called before the bootstrapper starts). */
  close(): void {
    this.state = 'closed';
  }
}
