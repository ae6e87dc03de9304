/**
 * SEV-SNP report verification: signature by the VCEK/VLEK, the chain to the operator-pinned ARK,
 * TCB rules, guest policy, ID-key digest and report-data binding. This is the hardware half of the
 * aws-sev-snp, gcp-sev-snp and azure-sev-snp validators (validators.ts adds the vTPM half) and the
 * engine of `confboot attestation verify-snp`. The checks are named steps (chain-checks.ts,
 * report-checks.ts) that all run and record, so a rejection lists all reasons, not just the first.
 */
import { messageOf } from '../../../ports/errors.js';
import type { AttestationCheck } from '../../../ports/types.js';
import { type CertificateInput, loadCertificate } from '../shared/certs.js';
import { CheckRecorder } from '../shared/checks.js';
import { asAttestationError } from '../shared/malformed.js';
import type { AmdSignerInfo } from './amd-certs.js';
import {
  checkArk,
  checkAsk,
  checkChainValidity,
  checkSignature,
  checkSigner,
  type SnpCheckContext,
} from './chain-checks.js';
import type { SnpChain, SnpPolicy } from './policy.js';
import { AMD_PRODUCT_NAMES, parseSnpReport, type SnpReport } from './report.js';
import {
  checkChipId,
  checkChipIdAllowed,
  checkExpectedReportData,
  checkGuestPolicy,
  checkIdKeyDigest,
  checkMitigations,
  checkProduct,
  checkProductPolicy,
  checkSignerTcb,
  checkTcbMinimums,
} from './report-checks.js';

/** The outcome of {@link verifySnpReport}. */
export interface SnpVerification {
  /** True when every check passed. */
  accepted: boolean;
  /** Every check in order, passed or failed. */
  checks: AttestationCheck[];
  /** Findings that do not fail validation (warn-only ID-key digest). */
  warnings: string[];
  /** The parsed report (absent when it could not be parsed). */
  report?: SnpReport;
  /** The signer's AMD extensions (absent when unreadable). */
  signer?: AmdSignerInfo;
}

/**
 * Verifies an SEV-SNP report (bytes; at least 0x4A0, trailing bytes ignored) signed by `signerInput`
 * (VCEK or VLEK) whose chain ends at the ARK pinned in `policy`, with certificate validity judged at
 * `at`. Never throws for a bad report: the result lists every check. Throws only when `policy` is
 * unusable (no ARK for the product).
 */
function verifySnpReportUnchecked(
  reportBytes: Uint8Array,
  signerInput: CertificateInput,
  chain: SnpChain,
  policy: SnpPolicy,
  at: Date,
): SnpVerification {
  const product = policy.product ?? 'milan';
  const pinnedInput = policy.arks[product];
  if (pinnedInput === undefined)
    throw new Error(`SEV-SNP policy has no pinned ARK for ${AMD_PRODUCT_NAMES[product]}`);
  const pinned = loadCertificate(pinnedInput, `pinned ARK for ${AMD_PRODUCT_NAMES[product]}`);
  const rec = new CheckRecorder();
  const warnings: string[] = [];
  let report: SnpReport;
  try {
    report = parseSnpReport(reportBytes, product);
    rec.pass('report-format', `version ${report.version}, ${report.trailingBytes} trailing bytes`);
  } catch (err) {
    rec.record('report-format', false, messageOf(err));
    return { accepted: false, checks: rec.checks, warnings };
  }
  const ctx: SnpCheckContext = { report, policy, product, pinned, at, rec, warnings };

  const signer = checkSigner(ctx, signerInput);
  checkSignature(ctx, signer);
  checkArk(ctx, chain);
  const ask = checkAsk(ctx, chain, signer);
  checkChainValidity(ctx, ask, signer);
  if (signer !== undefined) {
    checkProduct(ctx, signer);
    checkChipId(ctx, signer);
    checkSignerTcb(ctx, signer);
  }
  checkTcbMinimums(ctx);
  checkMitigations(ctx);
  checkChipIdAllowed(ctx);
  checkProductPolicy(ctx);
  checkGuestPolicy(ctx);
  checkIdKeyDigest(ctx);
  checkExpectedReportData(ctx);
  return {
    accepted: rec.accepted,
    checks: rec.checks,
    warnings,
    report,
    ...(signer ? { signer: signer.info } : {}),
  };
}

/** verifySnpReport with every unexpected failure turned into an AttestationError (see ../malformed.ts). */
export function verifySnpReport(
  reportBytes: Uint8Array,
  signerInput: CertificateInput,
  chain: SnpChain,
  policy: SnpPolicy,
  at: Date,
): SnpVerification {
  try {
    return verifySnpReportUnchecked(reportBytes, signerInput, chain, policy, at);
  } catch (err) {
    throw asAttestationError(err, 'snp-input', 'verifying SEV-SNP report');
  }
}
