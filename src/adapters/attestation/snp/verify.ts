/**
 * SEV-SNP report verification: signature by the VCEK/VLEK, the chain to the operator-pinned ARK,
 * TCB rules, guest policy, ID-key digest and report-data binding. This is the hardware half of the
 * aws-sev-snp, gcp-sev-snp and azure-sev-snp validators (validators.ts adds the vTPM half) and the
 * engine of `confboot attestation verify-snp`. Every check runs and is recorded, so a rejection
 * lists all reasons, not just the first.
 */
import { verify as cryptoVerify, timingSafeEqual, type X509Certificate } from 'node:crypto';
import { AttestationError, messageOf } from '../../../ports/errors.js';
import type { AttestationCheck } from '../../../ports/types.js';
import {
  type CertificateInput,
  commonName,
  describeCert,
  loadCertificate,
  validAt,
} from '../shared/certs.js';
import { asAttestationError } from '../shared/malformed.js';
import { type AmdSignerInfo, amdNames, amdSignerInfo } from './amd-certs.js';
import {
  AMD_PRODUCT_NAMES,
  type AmdProduct,
  formatTcb,
  parseSnpReport,
  productFromCpuid,
  SNP_MIT_VECTOR_VERSION,
  type SnpReport,
  type SnpTcbParts,
  tcbAtLeast,
  tcbEqual,
  tcbShortfall,
} from './report.js';

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

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
const errMsg = (e: unknown) => messageOf(e);

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Zero-pads (or rejects when longer) report data to 64 bytes. */
export function padReportData(data: Uint8Array): Uint8Array {
  if (data.length > 64) throw new Error(`report data is ${data.length} bytes, at most 64 fit`);
  const out = new Uint8Array(64);
  out.set(data);
  return out;
}

/** Verifies an SNP report's ECDSA P-384 signature with `signer`'s public key. */
export function verifySnpSignature(report: SnpReport, signer: X509Certificate): boolean {
  if (report.signatureHasHighBytes) return false;
  const sig = Buffer.concat([report.signatureR, report.signatureS]);
  try {
    return cryptoVerify(
      'sha384',
      report.signedBytes,
      { key: signer.publicKey, dsaEncoding: 'ieee-p1363' },
      sig,
    );
  } catch {
    return false;
  }
}

/**
 * Verifies an SEV-SNP report (bytes; at least 0x4A0, trailing bytes ignored) signed by `signer`
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
  const names = amdNames(product);
  const checks: AttestationCheck[] = [];
  const warnings: string[] = [];
  const add = (name: string, ok: boolean, detail: string) => checks.push({ name, ok, detail });
  const result = (report?: SnpReport, signer?: AmdSignerInfo): SnpVerification => ({
    accepted: checks.every((c) => c.ok),
    checks,
    warnings,
    ...(report ? { report } : {}),
    ...(signer ? { signer } : {}),
  });

  let report: SnpReport;
  try {
    report = parseSnpReport(reportBytes, product);
    add('report-format', true, `version ${report.version}, ${report.trailingBytes} trailing bytes`);
  } catch (err) {
    add('report-format', false, errMsg(err));
    return result();
  }

  let signerCert: X509Certificate | undefined;
  let signer: AmdSignerInfo | undefined;
  try {
    signerCert = loadCertificate(signerInput, 'report signer certificate');
    signer = amdSignerInfo(signerCert);
    add(
      'signer-certificate',
      true,
      `${signer.kind.toUpperCase()} ${signer.productName} tcb ${formatTcb(signer.tcb)}`,
    );
  } catch (err) {
    add('signer-certificate', false, errMsg(err));
  }

  // The report says which key signed it; it must be the kind of certificate we were given.
  const allowed = policy.allowedSigners ?? ['vcek', 'vlek'];
  if (signer !== undefined) {
    const kind = report.signerInfo.signingKey;
    if (kind !== signer.kind)
      add(
        'signing-key',
        false,
        `report says signing key ${kind}, certificate is a ${signer.kind.toUpperCase()}`,
      );
    else if (!allowed.includes(signer.kind))
      add(
        'signing-key',
        false,
        `report signed by the ${signer.kind.toUpperCase()}, policy allows ${allowed.map((k) => k.toUpperCase()).join(' or ')} only`,
      );
    else add('signing-key', true, signer.kind.toUpperCase());
  }

  add(
    'signature-algorithm',
    report.signatureAlgo === 1,
    report.signatureAlgo === 1
      ? 'ECDSA P-384 with SHA-384'
      : `unsupported signature algorithm ${report.signatureAlgo}`,
  );
  if (signerCert !== undefined) {
    const ok = verifySnpSignature(report, signerCert);
    const why = report.signatureHasHighBytes
      ? 'non-zero bytes outside R and S in the signature field'
      : 'does not verify with the signer certificate';
    add(
      'report-signature',
      ok,
      ok ? 'verifies with the signer certificate' : `report signature verification error: ${why}`,
    );
  }

  // Chain: pinned ARK (self-signed) → ASK/ASVK → signer.
  const pinnedOk = pinned.verify(pinned.publicKey) && commonName(pinned.subject) === names.ark;
  let arkOk = pinnedOk;
  let arkDetail = pinnedOk ? `${names.ark} pinned` : `pinned ARK is not a self-signed ${names.ark}`;
  if (chain.ark !== undefined) {
    try {
      const given = loadCertificate(chain.ark, 'ARK from the chain');
      if (!bytesEqual(given.raw, pinned.raw)) {
        arkOk = false;
        arkDetail = `the chain's ARK (${commonName(given.subject)}, sha256 ${given.fingerprint256}) is not the pinned ${names.ark}`;
      }
    } catch (err) {
      arkOk = false;
      arkDetail = errMsg(err);
    }
  }
  add('ark-pinned', arkOk, arkDetail);

  let ask: X509Certificate | undefined;
  if (chain.ask === undefined) {
    add('ask-signature', false, 'no ASK/ASVK supplied');
  } else {
    try {
      ask = loadCertificate(chain.ask, 'ASK');
      const want = signer?.kind === 'vlek' ? names.asvk : names.ask;
      const cn = commonName(ask.subject);
      if (cn !== want) add('ask-signature', false, `intermediate CN is ${JSON.stringify(cn)}, want ${want}`);
      else if (!ask.verify(pinned.publicKey))
        add(
          'ask-signature',
          false,
          `${cn} signature does not verify with the pinned ${names.ark} (RSASSA-PSS)`,
        );
      else add('ask-signature', true, `${cn} signed by ${names.ark}`);
    } catch (err) {
      add('ask-signature', false, errMsg(err));
    }
  }
  if (signerCert !== undefined && ask !== undefined) {
    const ok = signerCert.verify(ask.publicKey);
    add(
      'signer-chain',
      ok,
      ok
        ? `${commonName(signerCert.subject)} signed by ${commonName(ask.subject)}`
        : `${commonName(signerCert.subject)} signature does not verify with ${commonName(ask.subject)} (RSASSA-PSS)`,
    );
  }

  const certs = [pinned, ...(ask ? [ask] : []), ...(signerCert ? [signerCert] : [])];
  const expired = certs.filter((c) => !validAt(c, at));
  add(
    'certificate-validity',
    expired.length === 0,
    expired.length === 0
      ? `all certificates valid at ${at.toISOString()}`
      : `not valid at ${at.toISOString()}: ${expired.map(describeCert).join('; ')}`,
  );

  if (signer !== undefined) {
    const family = signer.productName.split('-')[0] ?? '';
    const cpuProduct = productFromCpuid(report.cpuid);
    if (family !== AMD_PRODUCT_NAMES[product])
      add(
        'product',
        false,
        `signer is for ${JSON.stringify(signer.productName)}, want ${AMD_PRODUCT_NAMES[product]}`,
      );
    else if (cpuProduct !== undefined && cpuProduct !== product)
      add(
        'product',
        false,
        `report CPUID names ${AMD_PRODUCT_NAMES[cpuProduct]}, want ${AMD_PRODUCT_NAMES[product]}`,
      );
    else
      add(
        'product',
        true,
        `${signer.productName}${report.version >= 3 ? ` (cpuid family 0x${report.cpuid.family.toString(16)} model 0x${report.cpuid.model.toString(16)})` : ''}`,
      );

    if (signer.kind === 'vcek') {
      if (report.signerInfo.maskChipKey)
        add('chip-id', true, 'chip ID masked by MASK_CHIP_KEY; not compared');
      else if (signer.hwId === undefined) add('chip-id', false, 'VCEK has no hwID extension');
      else if (!bytesEqual(signer.hwId, report.chipId))
        add(
          'chip-id',
          false,
          `report chip_id ${hex(report.chipId)} differs from the VCEK hwID ${hex(signer.hwId)}`,
        );
      else add('chip-id', true, 'chip_id equals the VCEK hwID');
    }

    add(
      'reported-tcb',
      tcbEqual(report.reportedTcb, signer.tcb),
      tcbEqual(report.reportedTcb, signer.tcb)
        ? `reported TCB ${formatTcb(report.reportedTcb)} equals the ${signer.kind.toUpperCase()} TCB`
        : `reported TCB ${formatTcb(report.reportedTcb)} differs from the ${signer.kind.toUpperCase()} TCB ${formatTcb(signer.tcb)}`,
    );
    add(
      'current-tcb',
      tcbAtLeast(report.currentTcb, signer.tcb),
      tcbAtLeast(report.currentTcb, signer.tcb)
        ? `current TCB ${formatTcb(report.currentTcb)} ≥ the ${signer.kind.toUpperCase()} TCB`
        : `current TCB ${formatTcb(report.currentTcb)} is lower than the TCB of the ${signer.kind.toUpperCase()} ${formatTcb(signer.tcb)}`,
    );
  }
  add(
    'committed-tcb',
    tcbAtLeast(report.currentTcb, report.committedTcb),
    tcbAtLeast(report.currentTcb, report.committedTcb)
      ? `current TCB ≥ committed TCB ${formatTcb(report.committedTcb)}`
      : `current TCB ${formatTcb(report.currentTcb)} is lower than the committed TCB ${formatTcb(report.committedTcb)}`,
  );
  if (policy.minimumTcb !== undefined) {
    const ok = tcbAtLeast(report.reportedTcb, policy.minimumTcb);
    add(
      'minimum-tcb',
      ok,
      `reported TCB ${formatTcb(report.reportedTcb)} ${ok ? '≥' : 'is below the'} minimum ${formatTcb(policy.minimumTcb)}${ok ? '' : ` (short: ${tcbShortfall(report.reportedTcb, policy.minimumTcb)})`}`,
    );
  }
  if (policy.minimumLaunchTcb !== undefined) {
    const ok = tcbAtLeast(report.launchTcb, policy.minimumLaunchTcb);
    add(
      'minimum-launch-tcb',
      ok,
      `launch TCB ${formatTcb(report.launchTcb)} ${ok ? '≥' : 'is below the'} minimum ${formatTcb(policy.minimumLaunchTcb)}${ok ? '' : ` (short: ${tcbShortfall(report.launchTcb, policy.minimumLaunchTcb)})`}`,
    );
  }
  if (policy.minimumCommittedTcb !== undefined) {
    const ok = tcbAtLeast(report.committedTcb, policy.minimumCommittedTcb);
    add(
      'minimum-committed-tcb',
      ok,
      `committed TCB ${formatTcb(report.committedTcb)} ${ok ? '≥' : 'is below the'} minimum ${formatTcb(policy.minimumCommittedTcb)}${ok ? '' : ` (short: ${tcbShortfall(report.committedTcb, policy.minimumCommittedTcb)})`}`,
    );
  }
  for (const [name, which, min, actual] of [
    ['minimum-launch-mitigations', 'launch', policy.minimumLaunchMitigationVector, report.launchMitVector],
    [
      'minimum-current-mitigations',
      'current',
      policy.minimumCurrentMitigationVector,
      report.currentMitVector,
    ],
  ] as const) {
    if (min === undefined) continue;
    const want = `0x${min.toString(16)}`;
    if (actual === undefined)
      add(
        name,
        false,
        `want ${which} mitigation vector with bits ${want}, but report version ${report.version} carries none (version ≥ ${SNP_MIT_VECTOR_VERSION} does)`,
      );
    else {
      const missing = min & ~actual;
      add(
        name,
        missing === 0n,
        missing === 0n
          ? `${which} mitigation vector 0x${actual.toString(16)} has the required bits ${want}`
          : `${which} mitigation vector 0x${actual.toString(16)} lacks bits 0x${missing.toString(16)} of the required ${want}`,
      );
    }
  }
  if (policy.allowedChipIds !== undefined) {
    const masked = report.signerInfo.maskChipKey || report.chipId.every((b) => b === 0);
    const ok =
      !masked && policy.allowedChipIds.some((id) => id.length === 64 && bytesEqual(id, report.chipId));
    const list = policy.allowedChipIds.map((id) => `${hex(id).slice(0, 16)}…`).join(', ');
    add(
      'chip-id-allowed',
      ok,
      ok
        ? `chip_id ${hex(report.chipId).slice(0, 16)}… is in the allowlist`
        : masked
          ? `chip_id is masked or zero (signer ${report.signerInfo.signingKey.toUpperCase()}), want one of ${list}`
          : `chip_id ${hex(report.chipId)} is not in the allowlist (want one of ${list})`,
    );
  }
  const action = policy.productActions?.[product] ?? 'accept';
  if (action !== 'accept') {
    const msg = `${AMD_PRODUCT_NAMES[product]} reports are ${action === 'refuse' ? 'refused' : 'accepted with a warning'} by policy (productPolicy ${JSON.stringify(product)}: ${JSON.stringify(action)})`;
    if (action === 'warn') warnings.push(msg);
    add('product-policy', action === 'warn', msg);
  }

  const allowDebug = policy.allowDebug ?? false;
  add(
    'guest-policy-debug',
    allowDebug || !report.policy.debug,
    report.policy.debug
      ? `guest policy 0x${report.policy.raw.toString(16)} allows debugging${allowDebug ? ' (allowed by policy)' : ''}`
      : 'debugging disabled',
  );
  const allowSmt = policy.allowSmt ?? true;
  add(
    'guest-policy-smt',
    allowSmt || !report.policy.smt,
    report.policy.smt
      ? `SMT allowed by the guest${allowSmt ? '' : ', but the policy forbids SMT'}`
      : 'SMT not allowed by the guest',
  );
  const vmpl = policy.vmpl ?? 0;
  add(
    'vmpl',
    report.vmpl === vmpl,
    report.vmpl === vmpl ? `VMPL ${vmpl}` : `report VMPL ${report.vmpl} is not ${vmpl}`,
  );

  if (policy.idKeyDigests !== undefined) {
    const { accepted, enforcement } = policy.idKeyDigests;
    const bad = accepted.find((d) => d.length !== 48);
    if (bad !== undefined)
      add('id-key-digest', false, `bad hash size: accepted ID-key digest is ${bad.length} bytes, want 48`);
    else if (accepted.some((d) => bytesEqual(d, report.idKeyDigest)))
      add('id-key-digest', true, `ID-key digest ${hex(report.idKeyDigest)} accepted`);
    else if (enforcement === 'warn-only') {
      const msg = `report ID key not trusted: ${hex(report.idKeyDigest)} (warn-only)`;
      warnings.push(msg);
      add('id-key-digest', true, msg);
    } else
      add(
        'id-key-digest',
        false,
        `report ID key not trusted: ${hex(report.idKeyDigest)} is not in the accepted list`,
      );
  }

  if (policy.reportData !== undefined) {
    let want: Uint8Array | undefined;
    try {
      want = padReportData(policy.reportData);
    } catch (err) {
      add('report-data', false, errMsg(err));
    }
    if (want !== undefined) {
      const ok = bytesEqual(want, report.reportData);
      add(
        'report-data',
        ok,
        ok
          ? 'report_data matches'
          : `report_data ${hex(report.reportData)} differs from the expected ${hex(want)}`,
      );
    }
  }
  return result(report, signer);
}

/** Throws an AttestationError naming the first failed check (and carrying all of them) unless accepted. */
export function assertSnpAccepted(v: SnpVerification, operation: string): void {
  if (v.accepted) return;
  const failed = v.checks.filter((c) => !c.ok);
  const first = failed[0];
  throw new AttestationError(
    first?.name ?? 'sev-snp',
    `${operation}: ${failed.map((c) => `${c.name}: ${c.detail ?? 'failed'}`).join('; ')}`,
    { checks: v.checks },
  );
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
