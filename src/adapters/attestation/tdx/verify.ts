/**
 * TDX quote verification: the quote signature by the attestation key, the QE report signed by the
 * PCK key and binding that key, the PCK chain to the operator-supplied Intel SGX root, and — when
 * collateral is given — TCB info and QE identity (signatures, validity windows, FMSPC and TCB-level
 * matching) and both CRLs. The hardware half of the qemu-tdx and azure-tdx validators and the
 * engine of `confboot attestation verify-tdx`. The checks are named steps (here for the quote, in
 * collateral-checks.ts for the collateral) that all run and record, so a rejection lists every reason.
 */
import { createHash, createPublicKey, type X509Certificate } from 'node:crypto';
import { messageOf } from '../../../ports/errors.js';
import type { AttestationCheck } from '../../../ports/types.js';
import { type CertificateInput, commonName, loadCertificate, loadCertificates } from '../shared/certs.js';
import { CheckRecorder } from '../shared/checks.js';
import { checkCertificateValidity, checkReportData } from '../shared/hardware-checks.js';
import { asAttestationError } from '../shared/malformed.js';
import type { TdxCollateral } from './collateral.js';
import { checkCollateral, eqBytes, verifyP1363 } from './collateral-checks.js';
import { type PckExtensions, pckExtensions } from './pck.js';
import { INTEL_QE_VENDOR_ID, parseTdxQuote, type TdxQuote } from './quote.js';

/** What a quote must satisfy beyond its signatures. */
export interface TdxPolicy {
  /** Expected QE vendor ID (16 bytes). Default Intel's. */
  qeVendorId?: Uint8Array;
  minimumQeSvn?: number;
  minimumPceSvn?: number;
  /** Minimum TEE_TCB_SVN, compared byte by byte (16 bytes). */
  minimumTeeTcbSvn?: Uint8Array;
  /** Accepted MRSEAM values (48 bytes each). Absent means any. */
  mrSeam?: Uint8Array[];
  /**
   * Minimum TCB evaluation data number of the TCB info and the QE identity (Intel raises it with
   * each TCB recovery). Absent means any; when set, a quote verified without collateral is refused.
   */
  minimumTcbEvaluationDataNumber?: number;
  /** Required XFAM (8 bytes). Absent means any. */
  xfam?: Uint8Array;
  /** Accept a TD with the DEBUG attribute. Default false. */
  allowDebug?: boolean;
  /** Expected report data; shorter values are zero-padded to 64 bytes. Absent means not checked. */
  reportData?: Uint8Array;
  /** TCB statuses accepted for the platform and the QE. Default `['UpToDate']`. */
  acceptedTcbStatuses?: string[];
  /**
   * Match the quote's TCB against the TCB info's levels (default true). go-tdx-guest's `verify` with
   * collateral and revocation checks does not do this step (it is its separate verifyTdQuoteBody);
   * false reproduces that: the level is still evaluated and reported, but not enforced.
   */
  enforceTcbLevel?: boolean;
}

/** Inputs of {@link verifyTdxQuote}. */
export interface TdxVerifyOptions {
  /** The Intel SGX Root CA (PEM or DER) — configuration, never taken from the quote. */
  root: CertificateInput;
  /** Intel PCS collateral; absent means signatures and chain only. */
  collateral?: TdxCollateral;
  policy?: TdxPolicy;
  /** The time at which certificates, collateral and CRLs must be valid. */
  at: Date;
}

/** The outcome of {@link verifyTdxQuote}. */
export interface TdxVerification {
  accepted: boolean;
  checks: AttestationCheck[];
  quote?: TdxQuote;
  pck?: PckExtensions;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function p256Key(raw: Uint8Array) {
  return createPublicKey({
    key: {
      kty: 'EC',
      crv: 'P-256',
      x: Buffer.from(raw.subarray(0, 32)).toString('base64url'),
      y: Buffer.from(raw.subarray(32, 64)).toString('base64url'),
    },
    format: 'jwk',
  });
}

/** What the quote steps read, and the recorder they write to. */
interface QuoteCheckContext {
  quote: TdxQuote;
  policy: TdxPolicy;
  /** The pinned Intel SGX root. */
  root: X509Certificate;
  at: Date;
  rec: CheckRecorder;
}

/** The quote's PCK chain once it is readable. */
interface PckChain {
  leaf: X509Certificate;
  inter: X509Certificate;
  pck: PckExtensions | undefined;
}

/** `qe-vendor-id`, `quote-signature` (by the attestation key) and `qe-report-data` (binding that key). */
function checkQuoteSignature(ctx: QuoteCheckContext): void {
  const { rec, quote } = ctx;
  const vendor = ctx.policy.qeVendorId ?? Buffer.from(INTEL_QE_VENDOR_ID, 'hex');
  rec.expectEqual('qe-vendor-id', 'QE vendor ID', vendor, quote.qeVendorId);
  let sigOk = false;
  try {
    sigOk = verifyP1363(quote.signedBytes, p256Key(quote.attestationKey), quote.signature);
  } catch {
    sigOk = false;
  }
  rec.record(
    'quote-signature',
    sigOk,
    sigOk
      ? 'header and body signed by the attestation key'
      : 'unable to verify message digest: quote signature does not verify with the attestation key',
  );
  const binding = createHash('sha256').update(quote.attestationKey).update(quote.qeAuthData).digest();
  const want = Buffer.concat([binding, Buffer.alloc(32)]);
  const bindOk = eqBytes(want, quote.qeReport.reportData);
  rec.record(
    'qe-report-data',
    bindOk,
    bindOk
      ? 'QE report data = SHA-256(attestation key ‖ QE auth data)'
      : 'QE report data does not bind the attestation key',
  );
}

/**
 * `pck-chain` (leaf → intermediate → the pinned root), `certificate-validity`,
 * `qe-report-signature` (by the PCK key) and `pck-extensions`. Returns the chain when readable.
 */
function checkPckChain(ctx: QuoteCheckContext): PckChain | undefined {
  const { rec, quote, root, at } = ctx;
  let chain: X509Certificate[];
  try {
    chain = loadCertificates(quote.pckChainPem, 'PCK certificate chain');
    if (chain.length !== 3) throw new Error(`PCK chain has ${chain.length} certificates, want 3`);
  } catch (err) {
    rec.record('pck-chain', false, messageOf(err));
    return undefined;
  }
  const [leaf, inter, chainRoot] = chain as [X509Certificate, X509Certificate, X509Certificate];
  const problems: string[] = [];
  if (!eqBytes(chainRoot.raw, root.raw))
    problems.push(
      `chain root ${JSON.stringify(commonName(chainRoot.subject))} is not the pinned Intel SGX root`,
    );
  if (!root.verify(root.publicKey)) problems.push('the pinned root is not self-signed');
  if (!inter.verify(root.publicKey)) problems.push(`${commonName(inter.subject)} is not signed by the root`);
  if (!leaf.verify(inter.publicKey))
    problems.push(`${commonName(leaf.subject)} is not signed by ${commonName(inter.subject)}`);
  if (!commonName(leaf.subject).startsWith('Intel SGX PCK Certificate'))
    problems.push(`leaf CN is ${JSON.stringify(commonName(leaf.subject))}`);
  rec.record(
    'pck-chain',
    problems.length === 0,
    problems.length === 0
      ? `${commonName(leaf.subject)} → ${commonName(inter.subject)} → pinned root`
      : problems.join('; '),
  );
  checkCertificateValidity(rec, [leaf, inter, root], at);
  const qeOk = verifyP1363(quote.qeReport.raw, leaf.publicKey, quote.qeReportSignature);
  rec.record(
    'qe-report-signature',
    qeOk,
    qeOk ? 'QE report signed by the PCK key' : 'QE report signature does not verify with the PCK certificate',
  );
  let pck: PckExtensions | undefined;
  try {
    pck = pckExtensions(leaf);
    rec.pass('pck-extensions', `FMSPC ${hex(pck.fmspc)}, PCE-ID ${hex(pck.pceId)}`);
  } catch (err) {
    rec.record('pck-extensions', false, messageOf(err));
  }
  return { leaf, inter, pck };
}

/** The policy on the quote itself: debug, SVNs, MRSEAM, XFAM and report data. */
function checkQuotePolicy(ctx: QuoteCheckContext): void {
  const { rec, quote, policy } = ctx;
  const body = quote.body;
  const debug = ((body.tdAttributes[0] as number) & 1) === 1;
  rec.record(
    'td-debug',
    !debug || (policy.allowDebug ?? false),
    debug ? 'TD attributes allow debugging' : 'debugging disabled',
  );
  for (const [name, what, actual, min] of [
    ['qe-svn', 'QE SVN', quote.qeSvn, policy.minimumQeSvn],
    ['pce-svn', 'PCE SVN', quote.pceSvn, policy.minimumPceSvn],
  ] as const)
    if (min !== undefined)
      rec.atLeast(name, actual >= min, what, { actual: String(actual), minimum: String(min) });
  if (policy.minimumTeeTcbSvn !== undefined) {
    const min = policy.minimumTeeTcbSvn;
    const ok = Array.from(min).every((v, i) => (body.teeTcbSvn[i] ?? 0) >= v);
    rec.atLeast('tee-tcb-svn', ok, 'TEE_TCB_SVN', { actual: hex(body.teeTcbSvn), minimum: hex(min) });
  }
  if (policy.mrSeam !== undefined) {
    const ok = policy.mrSeam.some((m) => eqBytes(m, body.mrSeam));
    rec.record(
      'mr-seam',
      ok,
      ok
        ? `MRSEAM ${hex(body.mrSeam)} accepted`
        : `MRSEAM ${hex(body.mrSeam)} is not in the allowlist (want one of ${policy.mrSeam.map((m) => `${hex(m).slice(0, 16)}…`).join(', ')})`,
    );
  }
  if (policy.xfam !== undefined) rec.expectEqual('xfam', 'XFAM', policy.xfam, body.xfam);
  if (policy.reportData !== undefined) checkReportData(rec, policy.reportData, body.reportData);
}

/**
 * Verifies a TDX quote v4/v5. Never throws for a bad quote; the result lists every check. Throws
 * only when the configured root is unreadable.
 */
async function verifyTdxQuoteUnchecked(
  quoteBytes: Uint8Array,
  options: TdxVerifyOptions,
): Promise<TdxVerification> {
  const root = loadCertificate(options.root, 'Intel SGX root CA');
  const policy = options.policy ?? {};
  const rec = new CheckRecorder();
  let quote: TdxQuote;
  try {
    quote = parseTdxQuote(quoteBytes);
    rec.pass(
      'quote-format',
      `version ${quote.version}, body type ${quote.bodyType}, ${quote.trailingBytes} trailing bytes`,
    );
  } catch (err) {
    rec.record('quote-format', false, messageOf(err));
    return { accepted: false, checks: rec.checks };
  }
  const ctx: QuoteCheckContext = { quote, policy, root, at: options.at, rec };
  checkQuoteSignature(ctx);
  const chain = checkPckChain(ctx);
  checkQuotePolicy(ctx);
  const minimumEvaluationDataNumber = policy.minimumTcbEvaluationDataNumber;
  if (minimumEvaluationDataNumber !== undefined && options.collateral === undefined)
    rec.record(
      'tcb-evaluation-data-number',
      false,
      `want TCB evaluation data number ≥ ${minimumEvaluationDataNumber}, but no collateral (TCB info, QE identity) was given to read it from`,
    );
  if (options.collateral !== undefined)
    await checkCollateral({
      collateral: options.collateral,
      quote,
      leaf: chain?.leaf,
      inter: chain?.inter,
      pck: chain?.pck,
      root,
      at: options.at,
      acceptedStatuses: policy.acceptedTcbStatuses ?? ['UpToDate'],
      enforceTcbLevel: policy.enforceTcbLevel !== false,
      minimumEvaluationDataNumber,
      rec,
    });
  const pck = chain?.pck;
  return { accepted: rec.accepted, checks: rec.checks, quote, ...(pck ? { pck } : {}) };
}

/** verifyTdxQuote with every unexpected failure turned into an AttestationError (see ../malformed.ts). */
export async function verifyTdxQuote(
  quoteBytes: Uint8Array,
  options: TdxVerifyOptions,
): Promise<TdxVerification> {
  try {
    return await verifyTdxQuoteUnchecked(quoteBytes, options);
  } catch (err) {
    throw asAttestationError(err, 'tdx-input', 'verifying TDX quote');
  }
}
