/**
 * What an SEV-SNP report must satisfy (the policy the attestation config builds, snp/config.ts) and
 * the certificates above its signer. Trust anchors are configuration: the operator supplies the ARKs.
 */
import type { CertificateInput } from '../shared/certs.js';
import type { AmdProduct, SnpTcbParts } from './report.js';

/** How the ID-key digest is enforced (upstream `idkeydigest.Enforcement`; MAAFallback needs MAA, which confboot does not use). */
export type IdKeyDigestEnforcement = 'equal' | 'warn-only';

/** What to do with reports from a product (e.g. refuse Milan after the 2026 key-extraction work). */
export type SnpProductAction = 'accept' | 'warn' | 'refuse';

/** What a report must satisfy. Trust anchors are configuration: the operator supplies the ARKs. */
export interface SnpPolicy {
  /** Expected product; selects the ARK and the TCB layout. Default `milan` (as upstream). */
  product?: AmdProduct;
  /** Pinned ARK per product (PEM or DER). The ARK of `product` must be present. */
  arks: Partial<Record<AmdProduct, CertificateInput>>;
  /** Signing keys accepted. Default both. */
  allowedSigners?: ('vcek' | 'vlek')[];
  /** Accept a guest policy with DEBUG set. Default false. */
  allowDebug?: boolean;
  /** Accept a guest policy with SMT allowed. Default true. */
  allowSmt?: boolean;
  /** Required VMPL. Default 0. */
  vmpl?: number;
  /** Minimum reported TCB (upstream MinimumTCB). */
  minimumTcb?: SnpTcbParts;
  /** Minimum launch TCB (upstream MinimumLaunchTCB). */
  minimumLaunchTcb?: SnpTcbParts;
  /** Minimum committed TCB (the TCB the firmware can no longer roll back below). */
  minimumCommittedTcb?: SnpTcbParts;
  /** Accepted chip IDs (64 bytes each). Absent means any chip; a masked or zero chip ID never matches. */
  allowedChipIds?: Uint8Array[];
  /**
   * Mitigation bits that must be set in LAUNCH_MIT_VECTOR. Absent means not checked; when set, a
   * report older than version 5 (which carries no vector) is refused.
   */
  minimumLaunchMitigationVector?: bigint;
  /** Mitigation bits that must be set in CURRENT_MIT_VECTOR; as minimumLaunchMitigationVector. */
  minimumCurrentMitigationVector?: bigint;
  /**
   * Check AMD's CRL for the ASK/ASVK and VCEK/VLEK (fetched through the validator's certificate
   * cache). Default false here; the attestation config turns it on by default.
   */
  checkRevocation?: boolean;
  /** Per product: accept (default), warn (accept and record a warning) or refuse. */
  productActions?: Partial<Record<AmdProduct, SnpProductAction>>;
  /** Accepted ID-key digests (48 bytes each). Absent means no ID-key policy. */
  idKeyDigests?: { accepted: Uint8Array[]; enforcement: IdKeyDigestEnforcement };
  /** Expected report_data; shorter values are zero-padded to 64 bytes. Absent means not checked. */
  reportData?: Uint8Array;
}

/** The chain above the signer: ASK (or ASVK) and optionally the ARK, which must equal the pinned one. */
export interface SnpChain {
  ask?: CertificateInput;
  ark?: CertificateInput;
}
