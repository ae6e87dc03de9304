/**
 * The SEV-SNP part of the attestation config: upstream's field names (`bootloaderVersion`,
 * `teeVersion`, `snpVersion`, `microcodeVersion`, `firmwareSignerConfig`, `amdRootKey`,
 * `amdSigningKey`) and confboot's own policy knobs (`acceptedChipIDs`, `reportSigner`,
 * `minimumCommittedTCB`, `minimumReportedTCB`, `minimum{Launch,Current}MitigationVector`,
 * `productPolicy`, `amdCRL`) turned into the policy and trust anchors of the SNP validators. Parsing
 * fails closed (shared/config-fields.ts); the accepted JSON is documented in
 * docs/attestation-config.md.
 */
import type { X509Certificate } from 'node:crypto';
import type { Measurements } from '../../../ports/types.js';
import { commonName } from '../shared/certs.js';
import {
  checkFields,
  checkMeasurementLength,
  hexBytes,
  invalidField,
  pemField,
  version,
} from '../shared/config-fields.js';
import { amdNames } from './amd-certs.js';
import type { IdKeyDigestEnforcement, SnpPolicy, SnpProductAction } from './policy.js';
import { AMD_PRODUCTS, type AmdProduct, type SnpTcbParts } from './report.js';
import type { SnpVariant } from './validators.js';

/** An SNP variant's config, ready for the validator. */
export interface SnpAttestationConfig {
  /** SNP policy without report data (the validator derives that per variant). */
  policy: Omit<SnpPolicy, 'reportData'>;
  /** `amdSigningKey`: the ASK (VCEK chain) or ASVK (VLEK chain) to use when the document has none. */
  signingKey?: { cert: X509Certificate; signer: 'vcek' | 'vlek' };
}

const SNP_FIELDS: ReadonlySet<string> = new Set([
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

const PRODUCT_ACTIONS: readonly SnpProductAction[] = ['accept', 'warn', 'refuse'];

function idKeyDigests(
  variant: string,
  v: unknown,
): { accepted: Uint8Array[]; enforcement: IdKeyDigestEnforcement } | undefined {
  if (v === undefined) return undefined;
  const field = 'firmwareSignerConfig';
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw invalidField(variant, field, 'want an object {"acceptedKeyDigests", "enforcementPolicy"}');
  const o = v as Record<string, unknown>;
  for (const key of Object.keys(o))
    if (!['acceptedKeyDigests', 'enforcementPolicy', 'maaURL'].includes(key))
      throw invalidField(variant, `${field}.${key}`, 'unknown field');
  if (!Array.isArray(o.acceptedKeyDigests))
    throw invalidField(variant, `${field}.acceptedKeyDigests`, 'want a list of hex SHA-384 digests');
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
    throw invalidField(
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
    throw invalidField(
      variant,
      field,
      'want an object {"bootloaderVersion", "teeVersion", "snpVersion", "microcodeVersion"}',
    );
  const o = v as Record<string, unknown>;
  const keys = ['bootloaderVersion', 'teeVersion', 'snpVersion', 'microcodeVersion'];
  for (const key of Object.keys(o))
    if (!keys.includes(key))
      throw invalidField(variant, `${field}.${key}`, `unknown field (accepted: ${keys.join(', ')})`);
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
  throw invalidField(
    variant,
    field,
    `want a bit mask: a non-negative integer or "0x" and up to 16 hex digits, got ${JSON.stringify(v)}`,
  );
}

/** `amdProduct`, default milan. */
function amdProduct(variant: string, raw: Record<string, unknown>): AmdProduct {
  const productRaw = raw.amdProduct ?? 'milan';
  if (typeof productRaw !== 'string' || !(AMD_PRODUCTS as readonly string[]).includes(productRaw))
    throw invalidField(
      variant,
      'amdProduct',
      `want one of ${AMD_PRODUCTS.join(', ')}, got ${JSON.stringify(productRaw)}`,
    );
  return productRaw as AmdProduct;
}

/** `amdRootKey`: the self-signed ARK of `product`. */
function amdRootKey(variant: string, raw: Record<string, unknown>, product: AmdProduct): X509Certificate {
  const names = amdNames(product);
  const ark = pemField(variant, raw, 'amdRootKey', `AMD root key (${names.ark})`);
  if (commonName(ark.subject) !== names.ark || !ark.verify(ark.publicKey))
    throw invalidField(
      variant,
      'amdRootKey',
      `not a self-signed ${names.ark} (got ${commonName(ark.subject) || ark.subject}); set amdProduct for another product`,
    );
  return ark;
}

/** `amdSigningKey`: an ASK or ASVK of `product` signed by `ark`; absent when not configured. */
function amdSigningKey(
  variant: string,
  raw: Record<string, unknown>,
  product: AmdProduct,
  ark: X509Certificate,
): SnpAttestationConfig['signingKey'] {
  if (raw.amdSigningKey === undefined) return undefined;
  const names = amdNames(product);
  const cert = pemField(variant, raw, 'amdSigningKey', `AMD signing key (${names.ask} or ${names.asvk})`);
  const cn = commonName(cert.subject);
  if (cn !== names.ask && cn !== names.asvk)
    throw invalidField(
      variant,
      'amdSigningKey',
      `want ${names.ask} or ${names.asvk}, got ${cn || cert.subject}`,
    );
  if (!cert.verify(ark.publicKey))
    throw invalidField(variant, 'amdSigningKey', `${cn} is not signed by the configured ${names.ark}`);
  return { cert, signer: cn === names.asvk ? 'vlek' : 'vcek' };
}

/** `acceptedChipIDs`: a non-empty list of 64-byte chip IDs; absent means any chip. */
function acceptedChipIds(variant: string, raw: Record<string, unknown>): Uint8Array[] | undefined {
  if (raw.acceptedChipIDs === undefined) return undefined;
  if (!Array.isArray(raw.acceptedChipIDs) || raw.acceptedChipIDs.length === 0)
    throw invalidField(variant, 'acceptedChipIDs', 'want a non-empty list of 64-byte hex chip IDs');
  return raw.acceptedChipIDs.map((id, i) => hexBytes(variant, `acceptedChipIDs[${i}]`, id, 64));
}

/** `reportSigner` (VCEK, VLEK or any), which must admit the configured signing key. */
function reportSigners(
  variant: string,
  raw: Record<string, unknown>,
  signingKey: SnpAttestationConfig['signingKey'],
): ('vcek' | 'vlek')[] {
  const signerRaw = raw.reportSigner ?? 'any';
  const signerName = typeof signerRaw === 'string' ? signerRaw.toLowerCase() : '';
  if (!['vcek', 'vlek', 'any'].includes(signerName))
    throw invalidField(
      variant,
      'reportSigner',
      `want "VCEK", "VLEK" or "any", got ${JSON.stringify(signerRaw)}`,
    );
  const allowedSigners: ('vcek' | 'vlek')[] =
    signerName === 'any' ? ['vcek', 'vlek'] : [signerName as 'vcek' | 'vlek'];
  if (signingKey !== undefined && !allowedSigners.includes(signingKey.signer))
    throw invalidField(
      variant,
      'amdSigningKey',
      `is for ${signingKey.signer.toUpperCase()}s, but reportSigner allows ${signerName.toUpperCase()} only`,
    );
  return allowedSigners;
}

/** `productPolicy`: per product accept, warn or refuse; Milan is warned about unless set. */
function productActions(
  variant: string,
  raw: Record<string, unknown>,
): Partial<Record<AmdProduct, SnpProductAction>> {
  // Milan: warned about by default (2026 key-extraction work); set "refuse" to stop accepting it.
  const actions: Partial<Record<AmdProduct, SnpProductAction>> = { milan: 'warn' };
  const pp = raw.productPolicy;
  if (pp === undefined) return actions;
  if (typeof pp !== 'object' || pp === null || Array.isArray(pp))
    throw invalidField(variant, 'productPolicy', 'want an object such as {"milan": "refuse"}');
  for (const [key, value] of Object.entries(pp as Record<string, unknown>)) {
    if (!(AMD_PRODUCTS as readonly string[]).includes(key))
      throw invalidField(
        variant,
        `productPolicy.${key}`,
        `unknown product (accepted: ${AMD_PRODUCTS.join(', ')})`,
      );
    if (typeof value !== 'string' || !(PRODUCT_ACTIONS as readonly string[]).includes(value))
      throw invalidField(
        variant,
        `productPolicy.${key}`,
        `want one of ${PRODUCT_ACTIONS.join(', ')}, got ${JSON.stringify(value)}`,
      );
    actions[key as AmdProduct] = value as SnpProductAction;
  }
  return actions;
}

/** `amdCRL`: enforce (default) or off. */
function checkRevocation(variant: string, raw: Record<string, unknown>): boolean {
  const crl = raw.amdCRL ?? 'enforce';
  if (crl !== 'enforce' && crl !== 'off')
    throw invalidField(variant, 'amdCRL', `want "enforce" or "off", got ${JSON.stringify(crl)}`);
  return crl === 'enforce';
}

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
  const product = amdProduct(variant, raw);
  const tcb = {
    bl: version(variant, raw, 'bootloaderVersion', 255),
    tee: version(variant, raw, 'teeVersion', 255),
    snp: version(variant, raw, 'snpVersion', 255),
    ucode: version(variant, raw, 'microcodeVersion', 255),
  };
  const ark = amdRootKey(variant, raw, product);
  const signingKey = amdSigningKey(variant, raw, product, ark);
  const digests = idKeyDigests(variant, raw.firmwareSignerConfig);
  const minimumCommittedTcb = tcbObject(variant, raw, 'minimumCommittedTCB');
  const minimumReportedTcb =
    tcbObject(variant, raw, 'minimumReportedTCB') ?? (variant === 'azure-sev-snp' ? tcb : undefined);
  const allowedChipIds = acceptedChipIds(variant, raw);
  const allowedSigners = reportSigners(variant, raw, signingKey);
  const actions = productActions(variant, raw);
  const revocation = checkRevocation(variant, raw);
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
      productActions: actions,
      checkRevocation: revocation,
    },
    ...(signingKey ? { signingKey } : {}),
  };
}
