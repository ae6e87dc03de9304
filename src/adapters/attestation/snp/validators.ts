/**
 * Validators for the SEV-SNP-on-vTPM variants aws-sev-snp, gcp-sev-snp and azure-sev-snp
 * (docs/upstream.md). The SNP report in InstanceInfo proves the hardware and binds the AK:
 *  - aws-sev-snp: report_data = SHA-512(PKIX DER of the AK);
 *  - gcp-sev-snp: report_data = extraData zero-padded, and the AK comes from the GCE API;
 *  - azure-sev-snp: report_data[0:32] = SHA-256(HCL runtime data), whose keys[0] is the AK.
 * The TPM quote is then verified by the injected vTPM verifier with nonce
 * SHA256(InstanceInfo ‖ extraData), and its PCRs compared with the configured measurements.
 */
import { createHash, type KeyObject } from 'node:crypto';
import type { Clock } from '../../../ports/clock.js';
import { isConfbootError, messageOf, wrapError } from '../../../ports/errors.js';
import type { MeasurementPolicy } from '../../../ports/measurement-policy.js';
import type { CallOptions } from '../../../ports/types.js';
import type { ValidationResult, Validator } from '../../../ports/validator.js';
import { VARIANT_OIDS } from '../../../ports/variant.js';
import { LOOKUP_BUDGET_EXHAUSTED } from '../../http/bounded-lookups.js';
import { checkHclRuntimeData } from '../azure/hcl-runtime-data.js';
import { commonName, loadCertificate, loadCertificates } from '../shared/certs.js';
import { CheckRecorder } from '../shared/checks.js';
import { verifyVtpmHalf } from '../shared/cvm-checks.js';
import { goBytes, parseVtpmDocument, type VerifyVtpmQuote } from '../shared/cvm-document.js';
import { validateWithVerdict } from '../shared/malformed.js';
import { decodeTpmtPublic, type TpmPublicKey } from '../shared/tpm-public.js';
import type { AmdCertCache } from './cert-cache.js';
import { checkAmdCrl } from './crl.js';
import type { SnpChain, SnpPolicy } from './policy.js';
import { parseSnpReport, type SnpReport } from './report.js';
import { verifySnpReport } from './verify.js';

/** The SNP variants. */
export type SnpVariant = 'aws-sev-snp' | 'gcp-sev-snp' | 'azure-sev-snp';

/** GCE instance identity carried in gcp-sev-snp InstanceInfo. */
export interface GceInstanceInfo {
  zone: string;
  project_id: string;
  instance_name: string;
}

/** Everything an SNP validator needs. Trust anchors and policy come from the attestation config. */
export interface SnpValidatorConfig {
  /** SNP policy without report data (the validator derives it per variant). */
  policy: Omit<SnpPolicy, 'reportData'>;
  measurements: MeasurementPolicy;
  /** The vTPM quote verifier (src/adapters/attestation/vtpm). */
  verifyVtpmQuote: VerifyVtpmQuote;
  /** Time for certificate validity. */
  clock: Clock;
  /** Fetches ASK/ASVK (and VCEKs) the issuer did not send. Without it they must be in the document. */
  certCache?: AmdCertCache;
  /** gcp-sev-snp: the AK from GCE's shielded instance identity (`signingKey.ekPub`). */
  gceAkPublicKey?: (instance: GceInstanceInfo, options?: CallOptions) => Promise<KeyObject>;
}

/** upstream `snp.InstanceInfo` (Go JSON, []byte as base64). */
interface InstanceInfoJson {
  ReportSigner?: string | null;
  CertChain?: string | null;
  AttestationReport?: string | null;
  Azure?: { RuntimeData?: string | null; MAAToken?: string } | null;
  GCP?: GceInstanceInfo | null;
}

/** Validates aws-sev-snp, gcp-sev-snp or azure-sev-snp attestation documents. */
export class SnpValidator implements Validator {
  readonly oid: string;

  constructor(
    readonly variant: SnpVariant,
    private readonly config: SnpValidatorConfig,
  ) {
    this.oid = VARIANT_OIDS[variant];
    if (variant === 'gcp-sev-snp' && config.gceAkPublicKey === undefined)
      throw new Error('gcp-sev-snp validator needs gceAkPublicKey (the GCE shielded identity lookup)');
  }

  validate(document: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<ValidationResult> {
    return validateWithVerdict(this.variant, () => this.validateUnchecked(document, nonce, options));
  }

  /** Records `amd-crl`: AMD's CRL from the certificate cache, verified against the pinned ARK. */
  private async checkRevocation(
    signerBytes: Uint8Array,
    chain: SnpChain,
    signerKind: 'vcek' | 'vlek',
    rec: CheckRecorder,
    options?: CallOptions,
  ): Promise<void> {
    const product = this.config.policy.product ?? 'milan';
    const fail = (detail: string) => {
      rec.record('amd-crl', false, detail);
    };
    const arkInput = this.config.policy.arks[product];
    if (arkInput === undefined) return fail(`no pinned ARK for ${product}`);
    let subjects: Parameters<typeof checkAmdCrl>[1];
    try {
      subjects = {
        ark: loadCertificate(arkInput, 'pinned ARK'),
        ask: chain.ask === undefined ? undefined : loadCertificate(chain.ask, 'ASK'),
        signer: loadCertificate(signerBytes, 'report signer certificate'),
      };
    } catch (err) {
      return fail(`revocation not checked: ${messageOf(err)}`);
    }
    if (this.config.certCache === undefined)
      return fail("revocation is required but there is no AMD KDS access to fetch AMD's CRL");
    let crl: Uint8Array;
    try {
      crl = await this.config.certCache.getCrl(product, signerKind, options);
    } catch (err) {
      return fail(messageOf(err));
    }
    rec.adopt([await checkAmdCrl(crl, subjects, this.config.clock.now())]);
  }

  private async validateUnchecked(
    document: Uint8Array,
    nonce: Uint8Array,
    options?: CallOptions,
  ): Promise<ValidationResult> {
    const rec = new CheckRecorder(`validating ${this.variant} attestation`);
    const { doc, info } = parseDocument(document, rec);
    const extraData = createHash('sha256').update(doc.userData).update(nonce).digest();
    let ak: TpmPublicKey;
    try {
      ak = decodeTpmtPublic(doc.akPub);
    } catch (err) {
      throw rec.fail('attestation-key', messageOf(err), { cause: err });
    }
    const report = goBytes(info.AttestationReport, 'AttestationReport');
    let parsed: SnpReport;
    try {
      parsed = parseSnpReport(report, this.config.policy.product ?? 'milan');
    } catch (err) {
      throw rec.fail('report-format', messageOf(err), { cause: err });
    }
    const { signer, chain } = await this.signerAndChain(info, parsed, rec, options);
    await this.checkHardware({ report, parsed, signer, chain, ak, extraData, info }, rec, options);
    rec.throwIfFailed();
    const trustedAk = this.variant === 'gcp-sev-snp' ? await this.gceAk(info, rec, options) : ak.key;
    const half = {
      verifyVtpmQuote: this.config.verifyVtpmQuote,
      doc,
      extraData,
      trustedAk,
      measurements: this.config.measurements,
    };
    return verifyVtpmHalf(half, rec, options);
  }

  /**
   * The report signer and the ASK: the issuer's signer, else the cache; the ASK from the issuer,
   * else the cache; never the issuer's ARK.
   */
  private async signerAndChain(
    info: InstanceInfoJson,
    parsed: SnpReport,
    rec: CheckRecorder,
    options?: CallOptions,
  ): Promise<{ signer: Uint8Array; chain: SnpChain }> {
    const product = this.config.policy.product ?? 'milan';
    let signer: Uint8Array = goBytes(info.ReportSigner, 'ReportSigner');
    const chain: SnpChain = {};
    const signerKind = parsed.signerInfo.signingKey === 'vlek' ? 'vlek' : 'vcek';
    const allowed = this.config.policy.allowedChipIds;
    if (
      signer.length === 0 &&
      allowed !== undefined &&
      !allowed.some((id) => id.length === parsed.chipId.length && Buffer.from(id).equals(parsed.chipId))
    )
      // The chip ID and TCB are the sender's claim until the signature is checked: a chip the
      // policy does not allow costs no request at AMD (VCEK fetches have their own small budget).
      throw rec.fail(
        'chip-id-allowed',
        `chip_id ${Buffer.from(parsed.chipId).toString('hex').slice(0, 16)}… is not in the allowlist (the document carries no VCEK; none fetched)`,
      );
    try {
      for (const cert of loadCertificates(goBytes(info.CertChain, 'CertChain'), 'CertChain').slice(0, 2))
        if (commonName(cert.subject).startsWith('SEV-')) chain.ask = cert;
      if (signer.length === 0) {
        if (signerKind === 'vlek' || this.config.certCache === undefined)
          throw new Error(`the document carries no ${signerKind.toUpperCase()} and none can be fetched`);
        signer = await this.config.certCache.getVcek(product, parsed.chipId, parsed.reportedTcb, options);
      }
      if (chain.ask === undefined && this.config.certCache !== undefined)
        chain.ask = (await this.config.certCache.getChain(product, signerKind, options)).ask;
    } catch (err) {
      // A used-up fetch budget is no verdict on the attester: it stays a recoverable error.
      if (isConfbootError(err) && err.reason === LOOKUP_BUDGET_EXHAUSTED)
        throw wrapError(`validating ${this.variant} attestation`, err);
      throw rec.fail('certificates', messageOf(err), { cause: err });
    }
    return { signer, chain };
  }

  /**
   * The hardware half: the SNP report with the variant's report data, AMD's CRL, and for
   * azure-sev-snp the HCL runtime data binding the AK. Records every check; the caller throws.
   */
  private async checkHardware(
    h: {
      report: Uint8Array;
      parsed: SnpReport;
      signer: Uint8Array;
      chain: SnpChain;
      ak: TpmPublicKey;
      extraData: Uint8Array;
      info: InstanceInfoJson;
    },
    rec: CheckRecorder,
    options?: CallOptions,
  ): Promise<void> {
    let expectedReportData: Uint8Array | undefined;
    if (this.variant === 'aws-sev-snp')
      expectedReportData = createHash('sha512')
        .update(h.ak.key.export({ type: 'spki', format: 'der' }))
        .digest();
    else if (this.variant === 'gcp-sev-snp') expectedReportData = h.extraData;
    const v = verifySnpReport(
      h.report,
      h.signer,
      h.chain,
      { ...this.config.policy, ...(expectedReportData ? { reportData: expectedReportData } : {}) },
      this.config.clock.now(),
    );
    rec.adopt(v.checks);
    const signerKind = h.parsed.signerInfo.signingKey === 'vlek' ? 'vlek' : 'vcek';
    // AMD's CRL only for a report whose own checks passed: a forged one costs no request.
    if (this.config.policy.checkRevocation === true && v.accepted)
      await this.checkRevocation(h.signer, h.chain, signerKind, rec, options);
    if (this.variant === 'azure-sev-snp') {
      const runtime = goBytes(h.info.Azure?.RuntimeData, 'Azure.RuntimeData');
      checkHclRuntimeData(h.parsed.reportData, runtime, h.ak.rsa, rec);
    }
  }

  /** gcp-sev-snp: the AK from GCE's shielded identity of the instance InstanceInfo names. */
  private async gceAk(info: InstanceInfoJson, rec: CheckRecorder, options?: CallOptions): Promise<KeyObject> {
    const gcp = info.GCP;
    if (gcp === undefined || gcp === null) throw rec.fail('gce-instance', 'InstanceInfo has no GCP instance');
    let trustedAk: KeyObject;
    try {
      trustedAk = await (this.config.gceAkPublicKey as NonNullable<SnpValidatorConfig['gceAkPublicKey']>)(
        gcp,
        options,
      );
    } catch (err) {
      throw rec.fail(
        'gce-ak',
        `getting the AK of ${gcp.project_id}/${gcp.zone}/${gcp.instance_name} from GCE: ${messageOf(err)}`,
        { cause: err },
      );
    }
    rec.pass('gce-ak', `AK from the shielded identity of ${gcp.instance_name}`);
    return trustedAk;
  }
}

/** Decodes the vTPM document and its SNP InstanceInfo; records `document-format`. */
function parseDocument(
  document: Uint8Array,
  rec: CheckRecorder,
): { doc: ReturnType<typeof parseVtpmDocument>; info: InstanceInfoJson } {
  try {
    const doc = parseVtpmDocument(document);
    const info = JSON.parse(Buffer.from(doc.instanceInfo).toString('utf8')) as InstanceInfoJson;
    if (typeof info !== 'object' || info === null) throw new Error('InstanceInfo is not a JSON object');
    rec.pass('document-format', 'vTPM attestation document with SNP instance info');
    return { doc, info };
  } catch (err) {
    throw rec.fail('document-format', `malformed document: ${messageOf(err)}`, { cause: err });
  }
}
