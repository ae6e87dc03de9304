/**
 * Validators for the TDX variants (upstream's formats, docs/upstream.md):
 *  - qemu-tdx: document `{"RawQuote": b64, "UserData": b64}`; the quote's report_data must be
 *    SHA256(userData ‖ nonce) (zero-padded); measurements 0 = MRTD, 1..4 = RTMR0..3.
 *  - azure-tdx: a vTPM document whose InstanceInfo is `{"AttestationReport": b64 quote,
 *    "RuntimeData": b64}`; the quote's report_data[0:32] = SHA-256(runtime data) and the runtime
 *    data's keys[0] is the AK; then the TPM quote (injected verifier) and PCR measurements.
 */
import { createHash } from 'node:crypto';
import type { Clock } from '../../../ports/clock.js';
import { type AttestationError, messageOf } from '../../../ports/errors.js';
import type { MeasurementPolicy } from '../../../ports/measurement-policy.js';
import type { CallOptions } from '../../../ports/types.js';
import type { ValidationResult, Validator } from '../../../ports/validator.js';
import { VARIANT_OIDS } from '../../../ports/variant.js';
import { checkHclRuntimeData } from '../azure/hcl-runtime-data.js';
import type { CertificateInput } from '../shared/certs.js';
import { CheckRecorder } from '../shared/checks.js';
import { acceptMeasurements, verifyVtpmHalf } from '../shared/cvm-checks.js';
import { goBytes, parseVtpmDocument, type VerifyVtpmQuote } from '../shared/cvm-document.js';
import { validateWithVerdict } from '../shared/malformed.js';
import { decodeTpmtPublic } from '../shared/tpm-public.js';
import type { TdxCollateral } from './collateral.js';
import { tdxMeasurements } from './quote.js';
import { type TdxPolicy, verifyTdxQuote } from './verify.js';

/** Everything a TDX validator needs. */
export interface TdxValidatorConfig {
  /** The Intel SGX Root CA (configuration). */
  root: CertificateInput;
  /** Quote policy (report data is derived per variant). */
  policy?: Omit<TdxPolicy, 'reportData'>;
  /** Returns collateral for an FMSPC (hex), e.g. from Intel PCS or a cache. Absent: chain only. */
  getCollateral?: (fmspc: string, options?: CallOptions) => Promise<TdxCollateral>;
  measurements: MeasurementPolicy;
  clock: Clock;
  /** azure-tdx only: the vTPM quote verifier. */
  verifyVtpmQuote?: VerifyVtpmQuote;
}

async function verifyQuoteWithCollateral(
  config: TdxValidatorConfig,
  quote: Uint8Array,
  reportData: Uint8Array | undefined,
  rec: CheckRecorder,
  options?: CallOptions,
) {
  const at = config.clock.now();
  const policy = { ...config.policy, ...(reportData ? { reportData } : {}) };
  let v = await verifyTdxQuote(quote, { root: config.root, policy, at });
  // Collateral is fetched only for a PCK certificate that chains to the pinned root: a forged
  // certificate must not make the service ask Intel PCS for an FMSPC of the attacker's choosing.
  const chainOk = v.checks.some((c) => c.name === 'pck-chain' && c.ok);
  if (config.getCollateral !== undefined && v.pck !== undefined && chainOk) {
    const fmspc = Buffer.from(v.pck.fmspc).toString('hex');
    let collateral: TdxCollateral;
    try {
      collateral = await config.getCollateral(fmspc, options);
    } catch (err) {
      throw rec.fail('collateral', `getting TDX collateral for FMSPC ${fmspc}: ${messageOf(err)}`, {
        cause: err,
      });
    }
    v = await verifyTdxQuote(quote, { root: config.root, policy, at, collateral });
  }
  rec.adopt(v.checks);
  return v;
}

/** Records the failed `document-format` check and returns the error to throw. */
function malformedDocument(err: unknown, rec: CheckRecorder): AttestationError {
  return rec.fail('document-format', `malformed document: ${messageOf(err)}`, { cause: err });
}

/** Validates qemu-tdx documents. */
export class QemuTdxValidator implements Validator {
  readonly variant = 'qemu-tdx' as const;
  readonly oid = VARIANT_OIDS['qemu-tdx'];

  constructor(private readonly config: TdxValidatorConfig) {}

  validate(document: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<ValidationResult> {
    return validateWithVerdict(this.variant, () => this.validateUnchecked(document, nonce, options));
  }

  private async validateUnchecked(
    document: Uint8Array,
    nonce: Uint8Array,
    options?: CallOptions,
  ): Promise<ValidationResult> {
    const rec = new CheckRecorder('validating qemu-tdx attestation');
    let quote: Uint8Array;
    let userData: Uint8Array;
    try {
      const doc = JSON.parse(Buffer.from(document).toString('utf8')) as Record<string, unknown>;
      quote = goBytes(doc.RawQuote, 'RawQuote');
      userData = goBytes(doc.UserData, 'UserData');
      if (quote.length === 0) throw new Error('RawQuote is empty');
    } catch (err) {
      throw malformedDocument(err, rec);
    }
    rec.pass('document-format', 'RawQuote and UserData');
    const extraData = createHash('sha256').update(userData).update(nonce).digest();
    const v = await verifyQuoteWithCollateral(this.config, quote, extraData, rec, options);
    rec.throwIfFailed();
    const measured = tdxMeasurements((v.quote as NonNullable<typeof v.quote>).body);
    return acceptMeasurements(this.config.measurements, measured, userData, rec);
  }
}

/** Validates azure-tdx documents. */
export class AzureTdxValidator implements Validator {
  readonly variant = 'azure-tdx' as const;
  readonly oid = VARIANT_OIDS['azure-tdx'];

  constructor(private readonly config: TdxValidatorConfig) {
    if (config.verifyVtpmQuote === undefined) throw new Error('azure-tdx validator needs verifyVtpmQuote');
  }

  validate(document: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<ValidationResult> {
    return validateWithVerdict(this.variant, () => this.validateUnchecked(document, nonce, options));
  }

  private async validateUnchecked(
    document: Uint8Array,
    nonce: Uint8Array,
    options?: CallOptions,
  ): Promise<ValidationResult> {
    const rec = new CheckRecorder('validating azure-tdx attestation');
    let doc: ReturnType<typeof parseVtpmDocument>;
    let quote: Uint8Array;
    let runtime: Uint8Array;
    let ak: ReturnType<typeof decodeTpmtPublic>;
    try {
      doc = parseVtpmDocument(document);
      const info = JSON.parse(Buffer.from(doc.instanceInfo).toString('utf8')) as Record<string, unknown>;
      quote = goBytes(info.AttestationReport, 'AttestationReport');
      runtime = goBytes(info.RuntimeData, 'RuntimeData');
      ak = decodeTpmtPublic(doc.akPub);
    } catch (err) {
      throw malformedDocument(err, rec);
    }
    rec.pass('document-format', 'vTPM attestation document with TDX instance info');
    const extraData = createHash('sha256').update(doc.userData).update(nonce).digest();
    const v = await verifyQuoteWithCollateral(this.config, quote, undefined, rec, options);
    if (v.quote !== undefined) checkHclRuntimeData(v.quote.body.reportData, runtime, ak.rsa, rec);
    rec.throwIfFailed();
    const half = {
      verifyVtpmQuote: this.config.verifyVtpmQuote as VerifyVtpmQuote,
      doc,
      extraData,
      trustedAk: ak.key,
      measurements: this.config.measurements,
    };
    return verifyVtpmHalf(half, rec, options);
  }
}
