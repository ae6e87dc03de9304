/**
 * `verifyAttestation`, the one function of `confboot/verify` (app layer, composition for verifiers):
 * offline verification of every kind of attestation evidence confboot knows, each by the adapter the
 * join service and `confboot attestation verify*` use —
 *   - `document`: a node's attestation document of any production variant (document-validators.ts);
 *   - `go-tpm-tools`: a raw go-tpm-tools `Attestation` protobuf (GCE's vTPM), AK by key or certificate chain;
 *   - `sev-snp-report`: an AMD SEV-SNP report with its VCEK/VLEK, ASK and ARK;
 *   - `tdx-quote`: an Intel TDX quote with its PCK chain and, when given, its collateral;
 *   - `nitrotpm`: an AWS NitroTPM attestation document with its chain to the Nitro root.
 * A refusal is a result (`accepted: false`, the failed check and every check so far), never a throw;
 * only a request that cannot be verified at all (no trust input, a bad config) throws.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import {
  type CertificateInput,
  commonName,
  keyPinCheck,
  loadCertificate,
  loadCertificates,
} from '../../adapters/attestation/shared/certs.js';
import { CheckRecorder } from '../../adapters/attestation/shared/checks.js';
import {
  type NitroTpmDocument,
  verifyNitroTpmDocument,
} from '../../adapters/attestation/shared/nitrotpm-document.js';
import { parseCertificates } from '../../adapters/attestation/shared/x509-chain.js';
import { AMD_ARK_SPKI_SHA256 } from '../../adapters/attestation/snp/amd-ark-pins.js';
import type { SnpPolicy } from '../../adapters/attestation/snp/policy.js';
import type { AmdProduct } from '../../adapters/attestation/snp/report.js';
import { type SnpVerification, verifySnpReport } from '../../adapters/attestation/snp/verify.js';
import type { TdxCollateral } from '../../adapters/attestation/tdx/collateral.js';
import { INTEL_SGX_ROOT_SPKI_SHA256 } from '../../adapters/attestation/tdx/intel-root-pin.js';
import { parseTdxQuote } from '../../adapters/attestation/tdx/quote.js';
import {
  type TdxPolicy,
  type TdxVerification,
  verifyTdxQuote,
} from '../../adapters/attestation/tdx/verify.js';
import { verifyRawAttestation } from '../../adapters/attestation/vtpm/raw-attestation.js';
import { ConfbootError, isAttestationError, messageOf } from '../../ports/errors.js';
import type { MeasurementPolicy } from '../../ports/measurement-policy.js';
import type { AttestationCheck, MeasurementMismatch } from '../../ports/types.js';
import {
  type DocumentValidatorOptions,
  type DocumentVariant,
  documentValidator,
} from './document-validators.js';

/** A node's attestation document of a production variant (what it sends in attested TLS). */
export interface DocumentRequest extends DocumentValidatorOptions {
  kind: 'document';
  variant: DocumentVariant;
  document: Uint8Array;
  /** The verifier's nonce (the document binds SHA-256(userData ‖ nonce)). */
  nonce: Uint8Array;
  /** qemu-vtpm with `qemuAkRegistry`: the address the document came from. */
  peerAddress?: string;
}

/** A raw go-tpm-tools `Attestation` protobuf; its quotes' qualifying data is `nonce` as is. */
export interface GoTpmToolsRequest {
  kind: 'go-tpm-tools';
  attestation: Uint8Array;
  nonce: Uint8Array;
  /** The AK the attestation must carry (PEM public key or KeyObject) … */
  trustedAk?: KeyObject | string;
  /** … or the roots and intermediates its AK certificate must chain to (PEM or DER, several per entry). */
  akRoots?: Array<Uint8Array | string>;
  /** Expected measurements; absent means the PCRs are not compared (reported in the checks). */
  policy?: MeasurementPolicy;
  at?: Date;
}

/** An AMD SEV-SNP attestation report and its certificates. */
export interface SnpReportRequest {
  kind: 'sev-snp-report';
  /** The report (at least 1184 bytes; trailing bytes are ignored). */
  report: Uint8Array;
  /** The VCEK or VLEK certificate that signed it. */
  signer: CertificateInput;
  /** The ASK (or ASVK), and optionally the ARK: PEM, e.g. AMD KDS's `cert_chain`. */
  chain?: Uint8Array | string;
  /**
   * The trusted ARK. Absent: the ARK in `chain` is used only if it carries AMD's key for `product`
   * (built-in pins; recorded as the `ark-pin` check).
   */
  ark?: CertificateInput;
  /** Default milan. */
  product?: AmdProduct;
  /** Policy knobs (guest policy, VMPL, minimum TCBs, ID-key digests, expected report data, …). */
  policy?: Omit<SnpPolicy, 'arks' | 'product'>;
  at?: Date;
}

/** An Intel TDX quote (v4 or v5). */
export interface TdxQuoteRequest {
  kind: 'tdx-quote';
  quote: Uint8Array;
  /**
   * The Intel SGX Root CA. Absent: the root of the quote's own PCK chain is used only if it carries
   * Intel's key (built-in pin; recorded as the `root-pin` check).
   */
  root?: CertificateInput;
  /** TCB info, QE identity and CRLs; absent means signatures and the PCK chain only. */
  collateral?: TdxCollateral;
  policy?: TdxPolicy;
  at?: Date;
}

/** An AWS NitroTPM attestation document (CBOR COSE_Sign1). */
export interface NitroTpmRequest {
  kind: 'nitrotpm';
  document: Uint8Array;
  /** The nonce it must carry. */
  nonce: Uint8Array;
  /** Accepted roots by SHA-256 (hex) of their DER; default AWS's Nitro root. */
  rootSha256?: readonly string[];
  /** When its certificates must be valid (its leaf lives three hours); default now. */
  at?: Date;
}

/** What {@link verifyAttestation} verifies. */
export type VerifyRequest =
  | DocumentRequest
  | GoTpmToolsRequest
  | SnpReportRequest
  | TdxQuoteRequest
  | NitroTpmRequest;

/** The verdict of {@link verifyAttestation}, with every check. */
export interface VerifyResult {
  accepted: boolean;
  kind: VerifyRequest['kind'];
  /** Every check performed, in order, passed or failed. */
  checks: AttestationCheck[];
  /** The first failed check's name (refused only). */
  failedCheck?: string;
  /** Why it was refused (refused only). */
  reason?: string;
  /** Measurement mismatches: enforced ones when refused, tolerated (warnOnly) ones when accepted. */
  mismatches: MeasurementMismatch[];
  /** Findings that do not refuse (e.g. a warn-only SEV-SNP ID-key digest). */
  warnings: string[];
  /** `document`: the user data the document binds (in attested TLS, SHA-256 of the TLS key). */
  userData?: Uint8Array;
  /** `document`: the measurement set the document matched, when the config names its sets. */
  measurementSet?: string;
  /** `sev-snp-report`: the parsed report and its signer's AMD extensions. */
  snp?: Pick<SnpVerification, 'report' | 'signer'>;
  /** `tdx-quote`: the parsed quote and its PCK certificate's extensions. */
  tdx?: Pick<TdxVerification, 'quote' | 'pck'>;
  /** `nitrotpm`: the signed contents. */
  nitroTpm?: NitroTpmDocument;
}

type Verdict = Pick<VerifyResult, 'accepted' | 'checks'> & Partial<VerifyResult>;

function result(kind: VerifyRequest['kind'], v: Verdict): VerifyResult {
  const failed = v.accepted ? undefined : v.checks.find((c) => !c.ok);
  return {
    kind,
    mismatches: [],
    warnings: [],
    ...v,
    ...(failed && v.failedCheck === undefined ? { failedCheck: failed.name } : {}),
    ...(failed && v.reason === undefined && failed.detail !== undefined ? { reason: failed.detail } : {}),
  };
}

/** An AttestationError as a refusal; anything else is rethrown. */
function refusal(kind: VerifyRequest['kind'], err: unknown): VerifyResult {
  if (!isAttestationError(err)) throw err;
  return result(kind, {
    accepted: false,
    checks: err.checks.length > 0 ? err.checks : [{ name: err.check, ok: false, detail: err.message }],
    failedCheck: err.check,
    reason: err.message,
    mismatches: err.mismatches,
  });
}

function withPin(v: Verdict, pin: AttestationCheck | undefined): Verdict {
  return pin === undefined ? v : { ...v, accepted: v.accepted && pin.ok, checks: [pin, ...v.checks] };
}

function badInput(what: string, err: unknown): ConfbootError {
  return new ConfbootError('invalid-argument', `${what}: ${messageOf(err)}`, { cause: err });
}

async function verifyDocument(r: DocumentRequest): Promise<VerifyResult> {
  const validator = documentValidator(r.variant, r);
  try {
    const v = await validator.validate(
      r.document,
      r.nonce,
      r.peerAddress ? { peerAddress: r.peerAddress } : {},
    );
    return result('document', {
      accepted: true,
      checks: v.checks,
      mismatches: v.warnings,
      userData: v.userData,
      ...(v.measurementSet !== undefined ? { measurementSet: v.measurementSet } : {}),
    });
  } catch (err) {
    return refusal('document', err);
  }
}

async function verifyGoTpmTools(r: GoTpmToolsRequest): Promise<VerifyResult> {
  let trust: Parameters<typeof verifyRawAttestation>[1]['trust'];
  if (r.trustedAk !== undefined) {
    try {
      trust = { trustedAk: typeof r.trustedAk === 'string' ? createPublicKey(r.trustedAk) : r.trustedAk };
    } catch (err) {
      throw badInput('trustedAk', err);
    }
  } else if (r.akRoots !== undefined && r.akRoots.length > 0) {
    const roots = [];
    for (const [i, pem] of r.akRoots.entries()) {
      try {
        roots.push(...(await parseCertificates(pem, `akRoots[${i}]`)));
      } catch (err) {
        throw badInput(`akRoots[${i}]`, err);
      }
    }
    trust = { roots, intermediates: roots, at: r.at ?? new Date() };
  } else
    throw new ConfbootError(
      'invalid-argument',
      'verifying a go-tpm-tools attestation needs trustedAk or akRoots',
    );
  try {
    const v = await verifyRawAttestation(r.attestation, {
      nonce: r.nonce,
      trust,
      ...(r.policy ? { policy: r.policy } : {}),
    });
    const checks = r.policy
      ? v.checks
      : v.checks.map((c) =>
          c.name === 'measurements' ? { ...c, detail: 'not compared (no policy given)' } : c,
        );
    return result('go-tpm-tools', { accepted: true, checks, mismatches: v.warnings });
  } catch (err) {
    return refusal('go-tpm-tools', err);
  }
}

function verifySnp(r: SnpReportRequest): VerifyResult {
  const product = r.product ?? 'milan';
  const arkName = `ARK-${product[0]?.toUpperCase()}${product.slice(1)}`;
  let chain: ReturnType<typeof loadCertificates>;
  let ark: ReturnType<typeof loadCertificate> | undefined;
  try {
    chain = r.chain === undefined ? [] : loadCertificates(r.chain, 'chain');
    ark = r.ark === undefined ? undefined : loadCertificate(r.ark, 'ark');
  } catch (err) {
    throw badInput('sev-snp-report certificates', err);
  }
  const isArk = (c: (typeof chain)[number]) => commonName(c.subject).startsWith('ARK-');
  const chainArk = chain.find(isArk);
  const ask = chain.find((c) => !isArk(c));
  const pinned = ark ?? chainArk;
  if (pinned === undefined)
    throw new ConfbootError(
      'invalid-argument',
      `verifying an SEV-SNP report needs ark, or a chain holding the ${arkName}`,
    );
  // Without `ark` the chain's ARK is trusted only with AMD's key for the product (the built-in pin).
  const pin =
    ark === undefined
      ? keyPinCheck('ark-pin', pinned, AMD_ARK_SPKI_SHA256[product], {
          key: `AMD's ${arkName} key`,
          found: `${arkName} from the chain`,
          foundFailing: 'the ARK in the chain',
        })
      : undefined;
  try {
    const v = verifySnpReport(
      r.report,
      r.signer,
      { ...(ask ? { ask } : {}), ...(chainArk ? { ark: chainArk } : {}) },
      { ...r.policy, product, arks: { [product]: pinned } },
      r.at ?? new Date(),
    );
    const snp = { ...(v.report ? { report: v.report } : {}), ...(v.signer ? { signer: v.signer } : {}) };
    return result(
      'sev-snp-report',
      withPin({ accepted: v.accepted, checks: v.checks, warnings: v.warnings, snp }, pin),
    );
  } catch (err) {
    return refusal('sev-snp-report', err);
  }
}

async function verifyTdx(r: TdxQuoteRequest): Promise<VerifyResult> {
  let root: CertificateInput;
  let pin: AttestationCheck | undefined;
  if (r.root !== undefined) root = r.root;
  else {
    let last: ReturnType<typeof loadCertificate> | undefined;
    try {
      last = loadCertificates(parseTdxQuote(r.quote).pckChainPem, 'PCK certificate chain').at(-1);
    } catch (err) {
      return refusal('tdx-quote', isAttestationError(err) ? err : badInput('quote', err));
    }
    if (last === undefined)
      throw new ConfbootError('invalid-argument', 'the quote carries no PCK certificate chain: pass root');
    root = last;
    pin = keyPinCheck('root-pin', last, INTEL_SGX_ROOT_SPKI_SHA256, {
      key: "Intel's SGX Root CA key",
      found: "the PCK chain's root",
    });
  }
  try {
    const v = await verifyTdxQuote(r.quote, {
      root,
      at: r.at ?? new Date(),
      ...(r.policy ? { policy: r.policy } : {}),
      ...(r.collateral ? { collateral: r.collateral } : {}),
    });
    const tdx = { ...(v.quote ? { quote: v.quote } : {}), ...(v.pck ? { pck: v.pck } : {}) };
    return result('tdx-quote', withPin({ accepted: v.accepted, checks: v.checks, tdx }, pin));
  } catch (err) {
    return refusal('tdx-quote', err);
  }
}

function verifyNitroTpm(r: NitroTpmRequest): VerifyResult {
  const rec = new CheckRecorder();
  try {
    const doc = verifyNitroTpmDocument(
      r.document,
      { at: r.at ?? new Date(), nonce: r.nonce, ...(r.rootSha256 ? { rootSha256: r.rootSha256 } : {}) },
      rec,
    );
    return result('nitrotpm', { accepted: true, checks: rec.checks, nitroTpm: doc });
  } catch (err) {
    if (!isAttestationError(err) || err.checks.length > 0) return refusal('nitrotpm', err);
    const checks = rec.checks.length > 0 ? rec.checks : [{ name: err.check, ok: false, detail: err.message }];
    return result('nitrotpm', { accepted: false, checks, failedCheck: err.check, reason: err.message });
  }
}

/**
 * Verifies one piece of attestation evidence offline and returns the verdict with every check.
 * No network request is made unless a lookup or fetcher the caller passes makes one.
 * @throws ConfbootError `invalid-argument` when the request cannot be verified at all: an unknown
 *   kind or variant, missing trust input (an AK, roots, an attestation config) or a bad config. A
 *   document that fails any check resolves with `accepted: false` instead.
 */
export async function verifyAttestation(request: VerifyRequest): Promise<VerifyResult> {
  switch (request.kind) {
    case 'document':
      return verifyDocument(request);
    case 'go-tpm-tools':
      return verifyGoTpmTools(request);
    case 'sev-snp-report':
      return verifySnp(request);
    case 'tdx-quote':
      return verifyTdx(request);
    case 'nitrotpm':
      return verifyNitroTpm(request);
    default:
      throw new ConfbootError(
        'invalid-argument',
        `unknown kind ${JSON.stringify((request as { kind?: unknown }).kind)}: one of document, go-tpm-tools, sev-snp-report, tdx-quote, nitrotpm`,
      );
  }
}
