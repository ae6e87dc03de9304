/**
 * The TDX part of the attestation config: upstream's field names (`qeSVN`, `pceSVN`, `teeTCBSVN`,
 * `qeVendorID`, `mrSeam`, `xfam`, `intelRootKey`) and confboot's own policy knobs (an `mrSeam` list,
 * `minimumTcbEvaluationDataNumber`) turned into the policy and trust anchor of the TDX validators;
 * parsing fails closed (shared/config-fields.ts), the accepted JSON is documented in
 * docs/attestation-config.md. Also where TDX collateral comes from (`--tdx-collateral DIR|pcs|pcs:URL`):
 * a directory or Intel PCS, as the validators' getCollateral.
 */
import type { X509Certificate } from 'node:crypto';
import type { Clock } from '../../../ports/clock.js';
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { Measurements } from '../../../ports/types.js';
import {
  checkFields,
  checkMeasurementLength,
  hexBytes,
  invalidField,
  optionalVersion,
  pemField,
  version,
} from '../shared/config-fields.js';
import { loadTdxCollateralDir } from './collateral.js';
import {
  checkHttpUrl,
  INTEL_PCS_BASE_URL,
  IntelPcsCollateralSource,
  type IntelPcsOptions,
} from './pcs-client.js';
import type { TdxValidatorConfig } from './validators.js';
import type { TdxPolicy } from './verify.js';

/** A TDX variant's config, ready for the validator. */
export interface TdxAttestationConfig {
  /** `intelRootKey`: the Intel SGX Root CA. */
  root: X509Certificate;
  /** Quote policy without report data. */
  policy: Omit<TdxPolicy, 'reportData'>;
}

const TDX_FIELDS: ReadonlySet<string> = new Set([
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
        throw invalidField(variant, field, 'missing (azure-tdx requires it, as upstream)');
  const root = pemField(variant, raw, 'intelRootKey', 'Intel SGX root CA');
  if (!root.verify(root.publicKey))
    throw invalidField(variant, 'intelRootKey', 'not a self-signed root certificate');
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
    throw invalidField(variant, 'mrSeam', 'want 48 bytes of hex or a non-empty list of them');
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
