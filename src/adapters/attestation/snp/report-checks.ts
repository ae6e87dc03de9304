/**
 * The SEV-SNP check steps about what a report says (verify.ts runs them in order, after the chain
 * steps of chain-checks.ts): product and chip, TCB against the signer and the policy's minimums,
 * mitigation vectors, chip allowlist, product policy, guest policy and VMPL, ID-key digest and
 * report data. Each step records its checks and goes on, so a rejection lists every reason.
 */
import { checkReportData } from '../shared/hardware-checks.js';
import { bytesEqual, type SnpCheckContext, type SnpSigner } from './chain-checks.js';
import {
  AMD_PRODUCT_NAMES,
  formatTcb,
  productFromCpuid,
  SNP_MIT_VECTOR_VERSION,
  type SnpTcbParts,
  tcbAtLeast,
  tcbEqual,
  tcbShortfall,
} from './report.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** `product`: the signer's product family and the report's CPUID name the policy's product. */
export function checkProduct(ctx: SnpCheckContext, signer: SnpSigner): void {
  const { rec, report, product } = ctx;
  const { info } = signer;
  const family = info.productName.split('-')[0] ?? '';
  const cpuProduct = productFromCpuid(report.cpuid);
  if (family !== AMD_PRODUCT_NAMES[product])
    rec.record(
      'product',
      false,
      `signer is for ${JSON.stringify(info.productName)}, want ${AMD_PRODUCT_NAMES[product]}`,
    );
  else if (cpuProduct !== undefined && cpuProduct !== product)
    rec.record(
      'product',
      false,
      `report CPUID names ${AMD_PRODUCT_NAMES[cpuProduct]}, want ${AMD_PRODUCT_NAMES[product]}`,
    );
  else
    rec.pass(
      'product',
      `${info.productName}${report.version >= 3 ? ` (cpuid family 0x${report.cpuid.family.toString(16)} model 0x${report.cpuid.model.toString(16)})` : ''}`,
    );
}

/** `chip-id` (VCEK only): the report's chip_id is the VCEK's hwID, unless masked. */
export function checkChipId(ctx: SnpCheckContext, signer: SnpSigner): void {
  const { rec, report } = ctx;
  const { info } = signer;
  if (info.kind !== 'vcek') return;
  if (report.signerInfo.maskChipKey) rec.pass('chip-id', 'chip ID masked by MASK_CHIP_KEY; not compared');
  else if (info.hwId === undefined) rec.record('chip-id', false, 'VCEK has no hwID extension');
  else if (!bytesEqual(info.hwId, report.chipId))
    rec.record(
      'chip-id',
      false,
      `report chip_id ${hex(report.chipId)} differs from the VCEK hwID ${hex(info.hwId)}`,
    );
  else rec.pass('chip-id', 'chip_id equals the VCEK hwID');
}

/** `reported-tcb` (equal to the signer's TCB) and `current-tcb` (at least the signer's TCB). */
export function checkSignerTcb(ctx: SnpCheckContext, signer: SnpSigner): void {
  const { rec, report } = ctx;
  const { tcb, kind } = signer.info;
  const key = kind.toUpperCase();
  const reportedOk = tcbEqual(report.reportedTcb, tcb);
  rec.record(
    'reported-tcb',
    reportedOk,
    reportedOk
      ? `reported TCB ${formatTcb(report.reportedTcb)} equals the ${key} TCB`
      : `reported TCB ${formatTcb(report.reportedTcb)} differs from the ${key} TCB ${formatTcb(tcb)}`,
  );
  const currentOk = tcbAtLeast(report.currentTcb, tcb);
  rec.record(
    'current-tcb',
    currentOk,
    currentOk
      ? `current TCB ${formatTcb(report.currentTcb)} ≥ the ${key} TCB`
      : `current TCB ${formatTcb(report.currentTcb)} is lower than the TCB of the ${key} ${formatTcb(tcb)}`,
  );
}

/** `committed-tcb`, then each minimum TCB the policy sets, naming the shortfall of a failed one. */
export function checkTcbMinimums(ctx: SnpCheckContext): void {
  const { rec, report, policy } = ctx;
  const committedOk = tcbAtLeast(report.currentTcb, report.committedTcb);
  rec.record(
    'committed-tcb',
    committedOk,
    committedOk
      ? `current TCB ≥ committed TCB ${formatTcb(report.committedTcb)}`
      : `current TCB ${formatTcb(report.currentTcb)} is lower than the committed TCB ${formatTcb(report.committedTcb)}`,
  );
  const minimums: [string, string, SnpTcbParts, SnpTcbParts | undefined][] = [
    ['minimum-tcb', 'reported', report.reportedTcb, policy.minimumTcb],
    ['minimum-launch-tcb', 'launch', report.launchTcb, policy.minimumLaunchTcb],
    ['minimum-committed-tcb', 'committed', report.committedTcb, policy.minimumCommittedTcb],
  ];
  for (const [name, which, actual, min] of minimums) {
    if (min === undefined) continue;
    const ok = tcbAtLeast(actual, min);
    rec.atLeast(name, ok, `${which} TCB`, {
      actual: formatTcb(actual),
      minimum: formatTcb(min),
      ...(ok ? {} : { shortfall: tcbShortfall(actual, min) }),
    });
  }
}

/** The launch and current mitigation vectors have the bits the policy requires. */
export function checkMitigations(ctx: SnpCheckContext): void {
  const { rec, report, policy } = ctx;
  const vectors = [
    ['minimum-launch-mitigations', 'launch', policy.minimumLaunchMitigationVector, report.launchMitVector],
    [
      'minimum-current-mitigations',
      'current',
      policy.minimumCurrentMitigationVector,
      report.currentMitVector,
    ],
  ] as const;
  for (const [name, which, min, actual] of vectors) {
    if (min === undefined) continue;
    const want = `0x${min.toString(16)}`;
    if (actual === undefined) {
      rec.record(
        name,
        false,
        `want ${which} mitigation vector with bits ${want}, but report version ${report.version} carries none (version ≥ ${SNP_MIT_VECTOR_VERSION} does)`,
      );
      continue;
    }
    const missing = min & ~actual;
    rec.record(
      name,
      missing === 0n,
      missing === 0n
        ? `${which} mitigation vector 0x${actual.toString(16)} has the required bits ${want}`
        : `${which} mitigation vector 0x${actual.toString(16)} lacks bits 0x${missing.toString(16)} of the required ${want}`,
    );
  }
}

/** `chip-id-allowed`: with an allowlist, the (unmasked, non-zero) chip_id is in it. */
export function checkChipIdAllowed(ctx: SnpCheckContext): void {
  const { rec, report, policy } = ctx;
  if (policy.allowedChipIds === undefined) return;
  const masked = report.signerInfo.maskChipKey || report.chipId.every((b) => b === 0);
  const ok = !masked && policy.allowedChipIds.some((id) => id.length === 64 && bytesEqual(id, report.chipId));
  const list = policy.allowedChipIds.map((id) => `${hex(id).slice(0, 16)}…`).join(', ');
  rec.record(
    'chip-id-allowed',
    ok,
    ok
      ? `chip_id ${hex(report.chipId).slice(0, 16)}… is in the allowlist`
      : masked
        ? `chip_id is masked or zero (signer ${report.signerInfo.signingKey.toUpperCase()}), want one of ${list}`
        : `chip_id ${hex(report.chipId)} is not in the allowlist (want one of ${list})`,
  );
}

/** `product-policy`: a product the policy warns about is accepted with a warning, a refused one fails. */
export function checkProductPolicy(ctx: SnpCheckContext): void {
  const { product } = ctx;
  const action = ctx.policy.productActions?.[product] ?? 'accept';
  if (action === 'accept') return;
  const msg = `${AMD_PRODUCT_NAMES[product]} reports are ${action === 'refuse' ? 'refused' : 'accepted with a warning'} by policy (productPolicy ${JSON.stringify(product)}: ${JSON.stringify(action)})`;
  if (action === 'warn') ctx.warnings.push(msg);
  ctx.rec.record('product-policy', action === 'warn', msg);
}

/** `guest-policy-debug`, `guest-policy-smt` and `vmpl`. */
export function checkGuestPolicy(ctx: SnpCheckContext): void {
  const { rec, report, policy } = ctx;
  const allowDebug = policy.allowDebug ?? false;
  rec.record(
    'guest-policy-debug',
    allowDebug || !report.policy.debug,
    report.policy.debug
      ? `guest policy 0x${report.policy.raw.toString(16)} allows debugging${allowDebug ? ' (allowed by policy)' : ''}`
      : 'debugging disabled',
  );
  const allowSmt = policy.allowSmt ?? true;
  rec.record(
    'guest-policy-smt',
    allowSmt || !report.policy.smt,
    report.policy.smt
      ? `SMT allowed by the guest${allowSmt ? '' : ', but the policy forbids SMT'}`
      : 'SMT not allowed by the guest',
  );
  const vmpl = policy.vmpl ?? 0;
  rec.record(
    'vmpl',
    report.vmpl === vmpl,
    report.vmpl === vmpl ? `VMPL ${vmpl}` : `report VMPL ${report.vmpl} is not ${vmpl}`,
  );
}

/** `id-key-digest`: with an ID-key policy, the report's digest is accepted (or only warned about). */
export function checkIdKeyDigest(ctx: SnpCheckContext): void {
  const { rec, report } = ctx;
  if (ctx.policy.idKeyDigests === undefined) return;
  const { accepted, enforcement } = ctx.policy.idKeyDigests;
  const bad = accepted.find((d) => d.length !== 48);
  if (bad !== undefined)
    rec.record(
      'id-key-digest',
      false,
      `bad hash size: accepted ID-key digest is ${bad.length} bytes, want 48`,
    );
  else if (accepted.some((d) => bytesEqual(d, report.idKeyDigest)))
    rec.pass('id-key-digest', `ID-key digest ${hex(report.idKeyDigest)} accepted`);
  else if (enforcement === 'warn-only') {
    const msg = `report ID key not trusted: ${hex(report.idKeyDigest)} (warn-only)`;
    ctx.warnings.push(msg);
    rec.pass('id-key-digest', msg);
  } else
    rec.record(
      'id-key-digest',
      false,
      `report ID key not trusted: ${hex(report.idKeyDigest)} is not in the accepted list`,
    );
}

/** `report-data`: with expected report data, the report carries it (zero-padded to 64 bytes). */
export function checkExpectedReportData(ctx: SnpCheckContext): void {
  if (ctx.policy.reportData !== undefined)
    checkReportData(ctx.rec, ctx.policy.reportData, ctx.report.reportData);
}
