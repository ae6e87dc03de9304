/**
 * Join receipts: the claims the join service signs for every issued ticket (EAT Attestation Result
 * format, draft-ietf-rats-ear, Veraison's EAR profile; confboot's own claims carry the `confboot.`
 * prefix) and the signer of them.
 */

/** `eat_profile` of every receipt: the EAR profile Veraison's libraries and verifiers implement. */
export const EAR_PROFILE = 'tag:github.com,2023:veraison/ear';

/** EAR trust tiers (`ear.status`). */
export type EarStatus = 'affirming' | 'warning' | 'contraindicated' | 'none';

/** One appraisal (a `submods` entry). */
export interface EarAppraisal {
  'ear.status': EarStatus;
  'ear.trustworthiness-vector': Record<string, number>;
  'ear.appraisal-policy-id': string;
  /** The checks of this component, in order, with their outcome. */
  'confboot.checks': Array<{ name: string; ok: boolean }>;
  /** warnOnly measurement mismatches (measurements component only). */
  'confboot.warn-only-mismatches'?: Array<{ pcr: number; expected: string; actual: string | null }>;
}

/** The claims set of a receipt. */
export interface ReceiptClaims {
  eat_profile: typeof EAR_PROFILE;
  /** Seconds since the epoch. */
  iat: number;
  'ear.verifier-id': { developer: string; build: string };
  /** base64url of SHA-256 of the TLS-exporter nonce the evidence bound. */
  eat_nonce: string;
  submods: Record<string, EarAppraisal>;
  'confboot.receipt': ReceiptSubjectClaims;
  /** Present so the JWT also reads as a receipt for a subject in generic tools. */
  sub: string;
  [claim: string]: unknown;
}

/** Who and what a receipt is about (claim `confboot.receipt`). */
export interface ReceiptSubjectClaims {
  /** `IssueJoinTicket` or `IssueRejoinTicket`. */
  rpc: string;
  /** Node name from the kubelet CSR; absent for a rejoin (which names only its disk). */
  node?: string;
  diskUuid: string;
  controlPlane?: boolean;
  /** The caller's address as the join service saw it. */
  peer: string;
  variant: string;
  measurementSet: string;
  /** What `eat_nonce` is the hash of. */
  nonceBinding: 'sha256(tls-exporter-nonce)';
  /** SHA-256 of the node's TLS public key (SPKI) that the evidence committed to, hex. */
  tlsSpkiSha256: string;
}

/** Signs join receipts with the join service's receipt key. */
export interface ReceiptSigner {
  /** Key ID (`kid`) of the signing key, as published in the service's JWKS. */
  readonly keyId: string;
  /**
   * Signs `claims` as a compact JWT (ES256, header `kid` = {@link keyId}). Rejects only when the
   * key cannot sign; the claims are not checked.
   */
  sign(claims: ReceiptClaims): Promise<string>;
}

/** DI token for {@link ReceiptSigner}. */
export const ReceiptSigner = Symbol.for('confboot.ReceiptSigner');
