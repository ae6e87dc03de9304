/**
 * The SEV-SNP and TDX parts of the attestation config (attestation adapters): upstream's
 * field names (`bootloaderVersion`, `teeVersion`, `snpVersion`, `microcodeVersion`,
 * `firmwareSignerConfig`, `amdRootKey`, `amdSigningKey`; `qeSVN`, `pceSVN`, `teeTCBSVN`,
 * `qeVendorID`, `mrSeam`, `xfam`, `intelRootKey`) and confboot's own policy knobs (SNP:
 * `acceptedChipIDs`, `reportSigner`, `minimumCommittedTCB`, `minimumReportedTCB`,
 * `minimum{Launch,Current}MitigationVector`, `productPolicy`, `amdCRL`; TDX: an `mrSeam` list,
 * `minimumTcbEvaluationDataNumber`) turned into the policies and trust anchors of the adapters'
 * SNP/TDX validators. Parsing fails closed: an unknown field (a typo must not silently
 * drop a check), a missing trust anchor, a wrong length, `"latest"` (upstream resolves it through
 * its version API, which confboot does not use) — each is an `invalid-argument` error naming the
 * field. The accepted JSON is documented in docs/attestation-config.md. Also where TDX collateral
 * comes from (`--tdx-collateral DIR|pcs|pcs:URL`): a directory or Intel PCS, as the validators'
 * getCollateral.
 */
import type { X509Certificate } from 'node:crypto';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, messageOf, wrapError } from '../../ports/errors.js';
import type { Measurements } from '../../ports/types.js';
import { commonName, loadCertificate } from './shared/certs.js';
import { amdNames } from './snp/amd-certs.js';
import { AMD_PRODUCTS, type AmdProduct, type SnpTcbParts } from './snp/report.js';
import type { SnpVariant } from './snp/validators.js';
import type { IdKeyDigestEnforcement, SnpPolicy, SnpProductAction } from './snp/verify.js';
import { loadTdxCollateralDir } from './tdx/collateral.js';
import {
  checkHttpUrl,
  INTEL_PCS_BASE_URL,
  IntelPcsCollateralSource,
  type IntelPcsOptions,
} from './tdx/pcs-client.js';
import type { TdxValidatorConfig } from './tdx/validators.js';
import type { TdxPolicy } from './tdx/verify.js';

/** An SNP variant's config, ready for the validator. */
export interface SnpAttestationConfig {
  /** SNP policy without report data (the validator derives that per variant). */
  policy: Omit<SnpPolicy, 'reportData'>;
  /** `amdSigningKey`: the ASK (VCEK chain) or ASVK (VLEK chain) to use when the document has none. */
  signingKey?: { cert: X509Certificate; signer: 'vcek' | 'vlek' };
}

/** A TDX variant's config, ready for the validator. */
export interface TdxAttestationConfig {
  /** `intelRootKey`: the Intel SGX Root CA. */
  root: X509Certificate;
  /** Quote policy without report data. */
  policy: Omit<TdxPolicy, 'reportData'>;
}

const SNP_FIELDS = new Set([
  'measurements',
  'measurementSets',
  'bootloaderVersion',
  'teeVersion',
  'snpVersion',
  'microcodeVersion',
  'firmwareSignerConfig',
  'amdRootKey',
  'amdSigningKey',
  'amdProduct',
  'minimumCommittedTCB',
  'minimumReportedTCB',
  'acceptedChipIDs',
  'reportSigner',
  'minimumLaunchMitigationVector',
  'minimumCurrentMitigationVector',
  'productPolicy',
  'amdCRL',
]);
const TDX_FIELDS = new Set([
  'measurements',
  'measurementSets',
  'qeSVN',
  'pceSVN',
  'teeTCBSVN',
  'qeVendorID',
  'mrSeam',
  'xfam',
  'intelRootKey',
  'minimumTcbEvaluationDataNumber',
]);
/** Fields azure-tdx requires, as upstream's AzureTDX config does (qemu-tdx: optional). */
const AZURE_TDX_REQUIRED = ['qeSVN', 'pceSVN', 'teeTCBSVN', 'qeVendorID', 'xfam'] as const;

/** The error for `field` of `variant`'s config. */
function invalid(variant: string, field: string, problem: string, cause?: unknown): ConfbootError {
  return new ConfbootError(
    'invalid-argument',
    `invalid ${variant} attestation config: ${field}: ${problem}`,
    {
      ...(cause === undefined ? {} : { cause }),
    },
  );
}

function checkFields(variant: string, raw: Record<string, unknown>, allowed: Set<string>): void {
  for (const key of Object.keys(raw))
    if (!allowed.has(key))
      throw invalid(variant, key, `unknown field (accepted: ${[...allowed].join(', ')})`);
}

function version(variant: string, raw: Record<string, unknown>, field: string, max: number): number {
  const v = raw[field];
  if (v === 'latest')
    throw invalid(
      variant,
      field,
      '"latest" is resolved by upstream\'s version API, which confboot does not use; give the minimum as a number',
    );
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max)
    throw invalid(variant, field, `want an integer 0…${max}, got ${JSON.stringify(v)}`);
  return v;
}

function optionalVersion(
  variant: string,
  raw: Record<string, unknown>,
  field: string,
  max: number,
): number | undefined {
  return raw[field] === undefined ? undefined : version(variant, raw, field, max);
}

function hexBytes(variant: string, field: string, v: unknown, length: number): Uint8Array {
  if (typeof v !== 'string' || !/^(?:[0-9a-fA-F]{2})*$/.test(v) || v.length !== 2 * length)
    throw invalid(variant, field, `want ${length} bytes of hex, got ${JSON.stringify(v)}`);
  return Uint8Array.from(Buffer.from(v, 'hex'));
}

function pem(variant: string, raw: Record<string, unknown>, field: string, what: string): X509Certificate {
  const v = raw[field];
  if (typeof v !== 'string' || v.trim() === '')
    throw invalid(variant, field, `missing: the ${what} (PEM) is a trust anchor and has no default`);
  try {
    return loadCertificate(v, what);
  } catch (err) {
    throw invalid(variant, field, messageOf(err), err);
  }
}

function checkMeasurementLength(variant: string, measurements: Measurements, length: number): void {
  for (const [index, m] of measurements)
    if (m.expected.length !== length)
      throw invalid(
        variant,
        'measurements',
        `index ${index} has ${m.expected.length} bytes; ${variant} measures ${length === 48 ? 'MRTD/RTMRs (48 bytes)' : 'SHA-256 PCRs (32 bytes)'}`,
      );
}

function idKeyDigests(
  variant: string,
  v: unknown,
): { accepted: Uint8Array[]; enforcement: IdKeyDigestEnforcement } | undefined {
  if (v === undefined) return undefined;
  const field = 'firmwareSignerConfig';
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw invalid(variant, field, 'want an object {"acceptedKeyDigests", "enforcementPolicy"}');
  const o = v as Record<string, unknown>;
  for (const key of Object.keys(o))
    if (!['acceptedKeyDigests', 'enforcementPolicy', 'maaURL'].includes(key))
      throw invalid(variant, `${field}.${key}`, 'unknown field');
  if (!Array.isArray(o.acceptedKeyDigests))
    throw invalid(variant, `${field}.acceptedKeyDigests`, 'want a list of hex SHA-384 digests');
  const accepted = o.acceptedKeyDigests.map((d, i) =>
    hexBytes(variant, `${field}.acceptedKeyDigests[${i}]`, d, 48),
  );
  const policy = typeof o.enforcementPolicy === 'string' ? o.enforcementPolicy.toLowerCase() : undefined;
  let enforcement: IdKeyDigestEnforcement;
  // MAAFallback accepts an unlisted digest only through Microsoft Azure Attestation, which
  // confboot does not use: without MAA it is exactly Equal.
  if (policy === 'equal' || policy === 'maafallback') enforcement = 'equal';
  else if (policy === 'warnonly') enforcement = 'warn-only';
  else
    throw invalid(
      variant,
      `${field}.enforcementPolicy`,
      `want "Equal", "MAAFallback" or "WarnOnly", got ${JSON.stringify(o.enforcementPolicy)}`,
    );
  return { accepted, enforcement };
}

/** A TCB object `{bootloaderVersion, teeVersion, snpVersion, microcodeVersion}` (integers 0…255). */
function tcbObject(variant: string, raw: Record<string, unknown>, field: string): SnpTcbParts | undefined {
  const v = raw[field];
  if (v === undefined) return undefined;
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw invalid(
      variant,
      field,
      'want an object {"bootloaderVersion", "teeVersion", "snpVersion", "microcodeVersion"}',
    );
  const o = v as Record<string, unknown>;
  const keys = ['bootloaderVersion', 'teeVersion', 'snpVersion', 'microcodeVersion'];
  for (const key of Object.keys(o))
    if (!keys.includes(key))
      throw invalid(variant, `${field}.${key}`, `unknown field (accepted: ${keys.join(', ')})`);
  const n = (key: string) => version(variant, { [`${field}.${key}`]: o[key] }, `${field}.${key}`, 255);
  return {
    bl: n('bootloaderVersion'),
    tee: n('teeVersion'),
    snp: n('snpVersion'),
    ucode: n('microcodeVersion'),
  };
}

/** A 64-bit mitigation bit mask: a non-negative safe integer or a hex string `0x…` (up to 16 digits). */
function mitigationVector(variant: string, raw: Record<string, unknown>, field: string): bigint | undefined {
  const v = raw[field];
  if (v === undefined) return undefined;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  if (typeof v === 'string' && /^0x[0-9a-fA-F]{1,16}$/.test(v)) return BigInt(v);
  throw invalid(
    variant,
    field,
    `want a bit mask: a non-negative integer or "0x" and up to 16 hex digits, got ${JSON.stringify(v)}`,
  );
}

const PRODUCT_ACTIONS: readonly SnpProductAction[] = ['accept', 'warn', 'refuse'];

/**
 * Parses the SNP fields of an aws-sev-snp, gcp-sev-snp or azure-sev-snp attestation config.
 * The four TCB versions are the minimum launch TCB (and, for azure-sev-snp as upstream, also the
 * minimum reported TCB).
 * @throws ConfbootError `invalid-argument` naming the field
 */
export function parseSnpConfig(
  variant: SnpVariant,
  raw: Record<string, unknown>,
  measurements: Measurements,
): SnpAttestationConfig {
  checkFields(variant, raw, SNP_FIELDS);
  checkMeasurementLength(variant, measurements, 32);
  const productRaw = raw.amdProduct ?? 'milan';
  if (typeof productRaw !== 'string' || !(AMD_PRODUCTS as readonly string[]).includes(productRaw))
    throw invalid(
      variant,
      'amdProduct',
      `want one of ${AMD_PRODUCTS.join(', ')}, got ${JSON.stringify(productRaw)}`,
    );
  const product = productRaw as AmdProduct;
  const names = amdNames(product);
  const tcb = {
    bl: version(variant, raw, 'bootloaderVersion', 255),
    tee: version(variant, raw, 'teeVersion', 255),
    snp: version(variant, raw, 'snpVersion', 255),
    ucode: version(variant, raw, 'microcodeVersion', 255),
  };
  const ark = pem(variant, raw, 'amdRootKey', `AMD root key (${names.ark})`);
  if (commonName(ark.subject) !== names.ark || !ark.verify(ark.publicKey))
    throw invalid(
      variant,
      'amdRootKey',
      `not a self-signed ${names.ark} (got ${commonName(ark.subject) || ark.subject}); set amdProduct for another product`,
    );
  let signingKey: SnpAttestationConfig['signingKey'];
  if (raw.amdSigningKey !== undefined) {
    const cert = pem(variant, raw, 'amdSigningKey', `AMD signing key (${names.ask} or ${names.asvk})`);
    const cn = commonName(cert.subject);
    if (cn !== names.ask && cn !== names.asvk)
      throw invalid(
        variant,
        'amdSigningKey',
        `want ${names.ask} or ${names.asvk}, got ${cn || cert.subject}`,
      );
    if (!cert.verify(ark.publicKey))
      throw invalid(variant, 'amdSigningKey', `${cn} is not signed by the configured ${names.ark}`);
    signingKey = { cert, signer: cn === names.asvk ? 'vlek' : 'vcek' };
  }
  const digests = idKeyDigests(variant, raw.firmwareSignerConfig);
  const minimumCommittedTcb = tcbObject(variant, raw, 'minimumCommittedTCB');
  const minimumReportedTcb =
    tcbObject(variant, raw, 'minimumReportedTCB') ?? (variant === 'azure-sev-snp' ? tcb : undefined);
  let allowedChipIds: Uint8Array[] | undefined;
  if (raw.acceptedChipIDs !== undefined) {
    if (!Array.isArray(raw.acceptedChipIDs) || raw.acceptedChipIDs.length === 0)
      throw invalid(variant, 'acceptedChipIDs', 'want a non-empty list of 64-byte hex chip IDs');
    allowedChipIds = raw.acceptedChipIDs.map((id, i) => hexBytes(variant, `acceptedChipIDs[${i}]`, id, 64));
  }
  const signerRaw = raw.reportSigner ?? 'any';
  const signerName = typeof signerRaw === 'string' ? signerRaw.toLowerCase() : '';
  if (!['vcek', 'vlek', 'any'].includes(signerName))
    throw invalid(variant, 'reportSigner', `want "VCEK", "VLEK" or "any", got ${JSON.stringify(signerRaw)}`);
  const allowedSigners: ('vcek' | 'vlek')[] =
    signerName === 'any' ? ['vcek', 'vlek'] : [signerName as 'vcek' | 'vlek'];
  if (signingKey !== undefined && !allowedSigners.includes(signingKey.signer))
    throw invalid(
      variant,
      'amdSigningKey',
      `is for ${signingKey.signer.toUpperCase()}s, but reportSigner allows ${signerName.toUpperCase()} only`,
    );
  // Milan: warned about by default (2026 key-extraction work); set "refuse" to stop accepting it.
  const productActions: Partial<Record<AmdProduct, SnpProductAction>> = { milan: 'warn' };
  if (raw.productPolicy !== undefined) {
    const pp = raw.productPolicy;
    if (typeof pp !== 'object' || pp === null || Array.isArray(pp))
      throw invalid(variant, 'productPolicy', 'want an object such as {"milan": "refuse"}');
    for (const [key, value] of Object.entries(pp as Record<string, unknown>)) {
      if (!(AMD_PRODUCTS as readonly string[]).includes(key))
        throw invalid(
          variant,
          `productPolicy.${key}`,
          `unknown product (accepted: ${AMD_PRODUCTS.join(', ')})`,
        );
      if (typeof value !== 'string' || !(PRODUCT_ACTIONS as readonly string[]).includes(value))
        throw invalid(
          variant,
          `productPolicy.${key}`,
          `want one of ${PRODUCT_ACTIONS.join(', ')}, got ${JSON.stringify(value)}`,
        );
      productActions[key as AmdProduct] = value as SnpProductAction;
    }
  }
  const crl = raw.amdCRL ?? 'enforce';
  if (crl !== 'enforce' && crl !== 'off')
    throw invalid(variant, 'amdCRL', `want "enforce" or "off", got ${JSON.stringify(crl)}`);
  const launchMit = mitigationVector(variant, raw, 'minimumLaunchMitigationVector');
  const currentMit = mitigationVector(variant, raw, 'minimumCurrentMitigationVector');
  return {
    policy: {
      product,
      arks: { [product]: ark },
      minimumLaunchTcb: tcb,
      ...(minimumReportedTcb ? { minimumTcb: minimumReportedTcb } : {}),
      ...(minimumCommittedTcb ? { minimumCommittedTcb } : {}),
      ...(digests ? { idKeyDigests: digests } : {}),
      ...(allowedChipIds ? { allowedChipIds } : {}),
      allowedSigners,
      ...(launchMit === undefined ? {} : { minimumLaunchMitigationVector: launchMit }),
      ...(currentMit === undefined ? {} : { minimumCurrentMitigationVector: currentMit }),
      productActions,
      checkRevocation: crl === 'enforce',
    },
    ...(signingKey ? { signingKey } : {}),
  };
}

/**
 * Parses the TDX fields of an azure-tdx or qemu-tdx attestation config. azure-tdx requires
 * upstream's `qeSVN`, `pceSVN`, `teeTCBSVN`, `qeVendorID` and `xfam`; for qemu-tdx they are
 * optional. `intelRootKey` is required for both.
 * @throws ConfbootError `invalid-argument` naming the field
 */
export function parseTdxConfig(
  variant: 'azure-tdx' | 'qemu-tdx',
  raw: Record<string, unknown>,
  measurements: Measurements,
): TdxAttestationConfig {
  checkFields(variant, raw, TDX_FIELDS);
  checkMeasurementLength(variant, measurements, variant === 'qemu-tdx' ? 48 : 32);
  if (variant === 'azure-tdx')
    for (const field of AZURE_TDX_REQUIRED)
      if (raw[field] === undefined)
        throw invalid(variant, field, 'missing (azure-tdx requires it, as upstream)');
  const root = pem(variant, raw, 'intelRootKey', 'Intel SGX root CA');
  if (!root.verify(root.publicKey))
    throw invalid(variant, 'intelRootKey', 'not a self-signed root certificate');
  const qeSvn = optionalVersion(variant, raw, 'qeSVN', 0xffff);
  const pceSvn = optionalVersion(variant, raw, 'pceSVN', 0xffff);
  const policy: Omit<TdxPolicy, 'reportData'> = {
    ...(qeSvn === undefined ? {} : { minimumQeSvn: qeSvn }),
    ...(pceSvn === undefined ? {} : { minimumPceSvn: pceSvn }),
    ...(raw.teeTCBSVN === undefined
      ? {}
      : { minimumTeeTcbSvn: hexBytes(variant, 'teeTCBSVN', raw.teeTCBSVN, 16) }),
    ...(raw.qeVendorID === undefined
      ? {}
      : { qeVendorId: hexBytes(variant, 'qeVendorID', raw.qeVendorID, 16) }),
    ...(raw.mrSeam === undefined ? {} : { mrSeam: mrSeams(variant, raw.mrSeam) }),
    ...(raw.minimumTcbEvaluationDataNumber === undefined
      ? {}
      : {
          minimumTcbEvaluationDataNumber: version(variant, raw, 'minimumTcbEvaluationDataNumber', 0xffffffff),
        }),
    ...(raw.xfam === undefined ? {} : { xfam: hexBytes(variant, 'xfam', raw.xfam, 8) }),
  };
  return { root, policy };
}

/** `mrSeam`: one 48-byte hex value or a non-empty list of them (the MRSEAM allowlist). */
function mrSeams(variant: string, v: unknown): Uint8Array[] {
  if (typeof v === 'string') return [hexBytes(variant, 'mrSeam', v, 48)];
  if (!Array.isArray(v) || v.length === 0)
    throw invalid(variant, 'mrSeam', 'want 48 bytes of hex or a non-empty list of them');
  return v.map((m, i) => hexBytes(variant, `mrSeam[${i}]`, m, 48));
}

/** Where TDX collateral (TCB info, QE identity, CRLs and their chains) comes from. */
export type TdxCollateralSource =
  /** A directory in loadTdxCollateralDir's layout, read on every verification. */
  | { kind: 'dir'; dir: string }
  /**
   * Intel PCS (API v4) or a mirror with the same paths, fetched and cached; the root CA CRL from
   * `rootCrlUrl` (default Intel's, INTEL_ROOT_CA_CRL_URL).
   */
  | { kind: 'pcs'; baseUrl: string; rootCrlUrl?: string };

/**
 * Parses a `--tdx-collateral` value: `pcs` (Intel PCS at {@link INTEL_PCS_BASE_URL}), `pcs:URL`
 * (a PCS mirror or PCCS with the same v4 paths, http or https), anything else a directory (write
 * `./pcs` for a directory named pcs).
 * @throws ConfbootError `invalid-argument` for an empty value or a `pcs:` URL that is not http(s)
 */
export function parseTdxCollateralSource(value: string, rootCrlUrl?: string): TdxCollateralSource {
  if (value === '') throw new ConfbootError('invalid-argument', 'TDX collateral source is empty');
  const source = pcsSource(value);
  if (rootCrlUrl === undefined) return source;
  if (source.kind !== 'pcs')
    throw new ConfbootError(
      'invalid-argument',
      `a root CA CRL URL applies to Intel PCS collateral only (pcs or pcs:URL), not to the directory ${value}`,
    );
  return {
    ...source,
    rootCrlUrl: httpUrl(
      rootCrlUrl,
      `root CA CRL URL ${JSON.stringify(rootCrlUrl)}`,
      'an http(s) URL without query',
    ),
  };
}

/** `value` as a TDX collateral source without a root CRL URL. */
function pcsSource(value: string): TdxCollateralSource {
  if (value === 'pcs') return { kind: 'pcs', baseUrl: INTEL_PCS_BASE_URL };
  if (!value.startsWith('pcs:')) return { kind: 'dir', dir: value };
  const baseUrl = value.slice('pcs:'.length);
  return {
    kind: 'pcs',
    baseUrl: httpUrl(
      baseUrl,
      `TDX collateral source ${JSON.stringify(value)}`,
      `pcs:URL with an http(s) base URL without query, e.g. pcs:${INTEL_PCS_BASE_URL}`,
    ),
  };
}

/** `value` checked and normalised by {@link checkHttpUrl}; on failure `want` says what is expected. */
function httpUrl(value: string, what: string, want: string): string {
  try {
    return checkHttpUrl(value, what);
  } catch {
    throw new ConfbootError('invalid-argument', `${what}: want ${want}`);
  }
}

/**
 * The validators' getCollateral for `source`. A PCS source is one {@link IntelPcsCollateralSource}
 * (cache and single flight shared by every call): build it once per service, not per config
 * reload. A directory is read on each call; its errors name the directory (`unavailable`).
 */
export function tdxCollateralGetter(
  source: TdxCollateralSource,
  clock: Clock,
  pcsOptions: Omit<IntelPcsOptions, 'clock' | 'baseUrl'> = {},
): NonNullable<TdxValidatorConfig['getCollateral']> {
  if (source.kind === 'pcs')
    return new IntelPcsCollateralSource({
      ...pcsOptions,
      clock,
      baseUrl: source.baseUrl,
      ...(source.rootCrlUrl === undefined ? {} : { rootCrlUrl: source.rootCrlUrl }),
    }).getCollateral;
  const { dir } = source;
  return async (fmspc) => {
    try {
      return await loadTdxCollateralDir(dir, fmspc);
    } catch (err) {
      throw wrapError(`reading TDX collateral for FMSPC ${fmspc} from ${dir}`, err, 'unavailable');
    }
  };
}
