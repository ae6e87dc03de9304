/**
 * The vTPM Issuer: the attesting side of attested TLS for every TPM-based variant.
 * Where it sits: attested TLS calls issue(userData, nonce) with userData = SHA-256 of our TLS key
 * and the verifier's nonce; the document travels to the verifier, whose vTPM Validator checks it.
 *
 *   extraData = SHA256(userData ‖ nonce)
 *   tpmNonce  = SHA256(instanceInfo ‖ extraData)     (instanceInfo is variant-specific, may be absent)
 *   quote     = TPM2_Quote(AK, SHA-256 PCRs 0–23, qualifyingData = tpmNonce)
 *
 * The document is upstream's Go-JSON `AttestationDocument`, byte for byte as Go's encoding/json
 * writes it: struct field order, `omitempty` on the go-tpm-tools protobuf fields, standard base64
 * with padding, map keys sorted as strings, `null` for nil. By default only the SHA-256 bank is
 * quoted (go-tpm-tools quotes every bank; validators compare the SHA-256 quote only); a SHA-1 quote
 * can be added with {@link VtpmIssuerOptions.sha1Quoter}.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { Issuer } from '../../../ports/issuer.js';
import type { Tpm, TpmQuote } from '../../../ports/tpm.js';
import type { CallOptions } from '../../../ports/types.js';
import { isVariantName, type Variant } from '../../../ports/variant.js';
import { encodeVtpmDocument } from '../shared/vtpm-document.js';

/** The variants whose attestation is a vTPM quote (all but the test-only dummy and raw TDX). */
export type VtpmVariant = Exclude<Variant, 'dummy' | 'qemu-tdx'>;

/** go-tpm-tools `HashAlgo` values used in `pcrs.hash`. */
export const HASH_ALGO = { SHA1: 4, SHA256: 11, SHA384: 12 } as const;

/** Where Linux exposes the firmware's TCG event log. */
export const LINUX_EVENT_LOG_PATH = '/sys/kernel/security/tpm0/binary_bios_measurements';

/**
 * Supplies the variant's instance info, the bytes bound into the TPM nonce (e.g. Go JSON of AWS's
 * instance identity document, or of GCE's instance info). Undefined means none (JSON `null`).
 */
export type InstanceInfoProvider = (
  extraData: Uint8Array,
  options?: CallOptions,
) => Promise<Uint8Array | undefined>;

/** Options for {@link VtpmIssuer}. */
export interface VtpmIssuerOptions {
  /** The variant this issuer attests as. */
  variant: VtpmVariant;
  /** The OID this variant's documents travel under in attested TLS (the composition declares it). */
  oid: string;
  /** The TPM holding the attestation key. */
  tpm: Pick<Tpm, 'attestationKeyPublic' | 'quote'>;
  /** Variant-specific instance info; default none (qemu-vtpm). */
  instanceInfo?: InstanceInfoProvider;
  /**
   * A TCG event log file to include as `event_log` (e.g. {@link LINUX_EVENT_LOG_PATH}), read on
   * every issue because it grows. Default: no event log (swtpm has none).
   */
  eventLogPath?: string;
  /** PCRs to quote, default 0–23. */
  pcrs?: number[];
  /**
   * When set, the document also carries a quote of the SHA-1 bank, placed first as go-tpm-tools
   * orders banks. Default: SHA-256 only (validators compare the SHA-256 quote alone).
   */
  sha1Quoter?: Sha1Quoter;
  /**
   * When set, the document also carries a quote of the SHA-384 bank, after the SHA-256 one as
   * go-tpm-tools orders banks (aws-nitro-tpm: the bank AWS's NitroTPM document signs).
   */
  sha384Quoter?: BankQuoter<'sha384'>;
}

/** The vTPM issuer options a variant's issuer passes through (TPM, event log, PCRs, SHA-1 bank). */
export type VtpmIssuerBaseOptions = Omit<VtpmIssuerOptions, 'variant' | 'instanceInfo'>;

/** A TPM that can quote bank `B` too (e.g. the tpm2-tools adapter's `quoteBank`). */
export interface BankQuoter<B extends string> {
  /** Quotes bank `bank`'s PCRs `pcrs` with `qualifyingData`, signed by the same AK as the SHA-256 quote. */
  quoteBank(bank: B, qualifyingData: Uint8Array, pcrs?: number[], options?: CallOptions): Promise<TpmQuote>;
}

/** A TPM that can quote the SHA-1 bank too. */
export type Sha1Quoter = BankQuoter<'sha1'>;

/** One quote as go-tpm-tools' `tpm.Quote`. */
export interface GoTpmQuote {
  quote: Uint8Array;
  rawSig: Uint8Array;
  /** go-tpm-tools `HashAlgo` of the bank, see {@link HASH_ALGO}. */
  hash: number;
  pcrs: Map<number, Uint8Array>;
}

/** The fields of upstream's `vtpm.AttestationDocument` this issuer fills. */
export interface VtpmAttestationDocument {
  /** TPMT_PUBLIC of the attestation key. */
  akPub: Uint8Array;
  quotes: GoTpmQuote[];
  /** Raw TCG event log; omitted when undefined or empty. */
  eventLog?: Uint8Array;
  /** Variant instance info; `null` when undefined. */
  instanceInfo: Uint8Array | undefined;
  userData: Uint8Array;
}

/** `attestation.MakeExtraData`: SHA256(userData ‖ nonce). */
export function makeExtraData(userData: Uint8Array, nonce: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(userData).update(nonce).digest());
}

/** The quote's qualifying data: SHA256(instanceInfo ‖ extraData), instanceInfo empty when absent. */
export function makeTpmNonce(instanceInfo: Uint8Array | undefined, extraData: Uint8Array): Uint8Array {
  const h = createHash('sha256');
  if (instanceInfo) h.update(instanceInfo);
  return new Uint8Array(h.update(extraData).digest());
}

/**
 * Encodes the document as Go's encoding/json encodes `vtpm.AttestationDocument` holding a
 * go-tpm-tools `attest.Attestation`, through the one codec of that document
 * (shared/vtpm-document.ts): `{"Attestation":{"ak_pub",…,"TeeAttestation":null},"InstanceInfo",
 * "UserData"}`, every tagged field omitted when empty.
 */
export function encodeAttestationDocument(doc: VtpmAttestationDocument): Uint8Array {
  return encodeVtpmDocument({
    attestation: {
      akPub: doc.akPub,
      quotes: doc.quotes.map((q) => ({ quote: q.quote, rawSig: q.rawSig, pcrHashAlg: q.hash, pcrs: q.pcrs })),
      eventLog: doc.eventLog ?? new Uint8Array(0),
      akCert: new Uint8Array(0),
      intermediateCerts: [],
    },
    instanceInfo: doc.instanceInfo,
    userData: doc.userData,
  });
}

/**
 * Quotes the TPM and wraps the quote in upstream's attestation document, without the OID only
 * attested TLS needs (evidence for a host that checks the document itself).
 */
export class VtpmDocumentIssuer implements Pick<Issuer, 'variant' | 'issue'> {
  readonly variant: VtpmVariant;
  private readonly tpm: VtpmIssuerOptions['tpm'];
  private readonly instanceInfo: InstanceInfoProvider | undefined;
  private readonly eventLogPath: string | undefined;
  private readonly pcrs: number[] | undefined;
  private readonly sha1Quoter: Sha1Quoter | undefined;
  private readonly sha384Quoter: BankQuoter<'sha384'> | undefined;

  constructor(options: Omit<VtpmIssuerOptions, 'oid'>) {
    const name: string = options.variant;
    if (!isVariantName(name) || name === 'dummy' || name === 'qemu-tdx')
      throw new ConfbootError('invalid-argument', `vTPM issuer: unsupported variant ${options.variant}`);
    this.variant = options.variant;
    this.tpm = options.tpm;
    this.instanceInfo = options.instanceInfo;
    this.eventLogPath = options.eventLogPath;
    this.pcrs = options.pcrs;
    this.sha1Quoter = options.sha1Quoter;
    this.sha384Quoter = options.sha384Quoter;
  }

  async issue(userData: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    try {
      const extraData = makeExtraData(userData, nonce);
      const instanceInfo = this.instanceInfo ? await this.instanceInfo(extraData, options) : undefined;
      const tpmNonce = makeTpmNonce(instanceInfo, extraData);
      const akPub = await this.tpm.attestationKeyPublic(options);
      const quotes: GoTpmQuote[] = [];
      if (this.sha1Quoter) {
        const q1 = await this.sha1Quoter.quoteBank('sha1', tpmNonce, this.pcrs, options);
        quotes.push({ quote: q1.quote, rawSig: q1.rawSig, hash: HASH_ALGO.SHA1, pcrs: q1.pcrs });
      }
      const q = await this.tpm.quote(tpmNonce, this.pcrs, options);
      quotes.push({ quote: q.quote, rawSig: q.rawSig, hash: HASH_ALGO.SHA256, pcrs: q.pcrs });
      if (this.sha384Quoter) {
        const q3 = await this.sha384Quoter.quoteBank('sha384', tpmNonce, this.pcrs, options);
        quotes.push({ quote: q3.quote, rawSig: q3.rawSig, hash: HASH_ALGO.SHA384, pcrs: q3.pcrs });
      }
      const eventLog = this.eventLogPath ? await readEventLog(this.eventLogPath) : undefined;
      return encodeAttestationDocument({
        akPub,
        quotes,
        ...(eventLog ? { eventLog } : {}),
        instanceInfo,
        userData,
      });
    } catch (err) {
      throw wrapError(`issuing ${this.variant} attestation`, err);
    }
  }
}

/** The vTPM {@link Issuer}: a {@link VtpmDocumentIssuer} under the variant's OID, for attested TLS. */
export class VtpmIssuer extends VtpmDocumentIssuer implements Issuer {
  readonly oid: string;

  constructor(options: VtpmIssuerOptions) {
    super(options);
    this.oid = options.oid;
  }
}

async function readEventLog(path: string): Promise<Uint8Array> {
  try {
    return new Uint8Array(await readFile(path));
  } catch (err) {
    throw wrapError(`reading TCG event log ${path}`, err, 'unavailable');
  }
}

/** Options of {@link createQemuVtpmIssuer}. */
export type QemuVtpmIssuerOptions = Omit<VtpmIssuerOptions, 'variant' | 'tpm' | 'instanceInfo'>;

/**
 * The `qemu-vtpm` issuer: no instance info, AK trusted as is by the validator. With `options.oid`
 * (the variant registry's) it is an {@link Issuer} for attested TLS; without, it issues documents only.
 */
export function createQemuVtpmIssuer(
  tpm: VtpmIssuerOptions['tpm'],
  options: QemuVtpmIssuerOptions,
): VtpmIssuer;
export function createQemuVtpmIssuer(
  tpm: VtpmIssuerOptions['tpm'],
  options?: Omit<QemuVtpmIssuerOptions, 'oid'>,
): VtpmDocumentIssuer;
export function createQemuVtpmIssuer(
  tpm: VtpmIssuerOptions['tpm'],
  options: Partial<QemuVtpmIssuerOptions> = {},
): VtpmDocumentIssuer {
  const { oid, ...rest } = options;
  const base = { ...rest, variant: 'qemu-vtpm' as const, tpm };
  return oid === undefined ? new VtpmDocumentIssuer(base) : new VtpmIssuer({ ...base, oid });
}
