/**
 * Parsing of `confboot join-service`'s flags (application layer): checked and typed, usage errors
 * (exit 2) for anything malformed.
 */
import { parseTdxCollateralSource, type TdxCollateralSource } from '../../adapters/attestation/tdx/config.js';
import {
  ADMISSION_SETTINGS,
  type AdmissionSetting,
  type AdmissionSettingName,
  type AdmissionSettings,
  admissionSettingsFrom,
} from '../../adapters/grpc/atls/admission-settings.js';
import { messageOf } from '../../ports/errors.js';
import type { Variant } from '../../ports/variant.js';
import { deriveMemoryBounds } from '../join-service/memory.js';
import type { JoinServiceCsp } from '../join-service/production.js';
import type { ListenAddress } from '../join-service/service.js';
import { parseCommand, UsageError } from '../program/args.js';
import { cloudNames, isCloud, isVariant, variantNames } from '../registry/index.js';
import { joinServiceCommand, LOG_LEVELS } from './join-service-spec.js';

/** Parses `HOST:PORT` / `[V6]:PORT` for `--flag`. */
export function parseHostPort(flag: string, value: string): ListenAddress {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s]+)):(\d{1,5})$/.exec(value);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535) throw new UsageError(`--${flag}: want HOST:PORT, got "${value}"`);
  return { host: (m[1] ?? m[2]) as string, port };
}

/** Parses `--rate-limit`: `N/s` or `N` (N ≥ 0, decimals allowed). */
export function parseRateLimit(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(?:\/s)?$/.exec(value.trim());
  if (!m) throw new UsageError(`--rate-limit: want N/s (e.g. 10/s, 0 disables), got "${value}"`);
  return Number(m[1]);
}

/** Parses `--tdx-collateral DIR|pcs|pcs:URL` and `--tdx-root-crl-url URL`. */
function parseTdxCollateralFlag(
  value: string | undefined,
  rootCrlUrl: string | undefined,
): TdxCollateralSource | undefined {
  if (value === undefined) {
    if (rootCrlUrl !== undefined) throw new UsageError('--tdx-root-crl-url needs --tdx-collateral pcs[:URL]');
    return undefined;
  }
  try {
    return parseTdxCollateralSource(value, rootCrlUrl);
  } catch (err) {
    throw new UsageError(`--tdx-collateral: ${messageOf(err)}`);
  }
}

/** Parses `--memory-budget-mib`: a whole number of MiB the service can live in. */
function parseMemoryBudget(value: string): number {
  const mib = parseCount('memory-budget-mib', value);
  try {
    deriveMemoryBounds(mib);
  } catch (err) {
    throw new UsageError(`--memory-budget-mib: ${messageOf(err)}`);
  }
  return mib;
}

function parseCount(flag: string, value: string): number {
  if (!/^\d+$/.test(value)) throw new UsageError(`--${flag}: want a whole number ≥ 0, got "${value}"`);
  return Number(value);
}

function parsePositive(flag: string, value: string): number {
  const n = parseCount(flag, value);
  if (n < 1) throw new UsageError(`--${flag}: want a whole number ≥ 1, got "${value}"`);
  return n;
}

function parseOnOff(flag: string, value: string): boolean {
  if (value !== 'on' && value !== 'off') throw new UsageError(`--${flag}: want on or off, got "${value}"`);
  return value === 'on';
}

/** `--evidence-store`: `file` needs `--state-dir`; without the flag, `file` when a state directory is given. */
function parseEvidenceStore(
  value: string | undefined,
  stateDir: string | undefined,
): 'file' | 'cluster' | undefined {
  if (value === undefined) return stateDir === undefined ? undefined : 'file';
  if (value !== 'file' && value !== 'cluster')
    throw new UsageError(`--evidence-store: want file or cluster, got "${value}"`);
  if (value === 'file' && stateDir === undefined)
    throw new UsageError('--evidence-store=file needs --state-dir');
  return value;
}

/** The admission settings from their flags (every one has a default). */
function parseAdmissionFlags(v: Record<string, unknown>): AdmissionSettings {
  const values: Partial<Record<AdmissionSettingName, number>> = {};
  for (const [name, s] of Object.entries(ADMISSION_SETTINGS) as Array<
    [AdmissionSettingName, AdmissionSetting]
  >) {
    const raw = v[s.flag] as string;
    values[name] = s.min === 0 ? parseCount(s.flag, raw) : parsePositive(s.flag, raw);
  }
  return admissionSettingsFrom(values);
}

/** The flags, checked and typed. */
export interface JoinServiceFlags {
  csp: JoinServiceCsp;
  variant: Variant;
  attestationConfigPath: string;
  measurementSaltPath: string;
  keyServiceEndpoint: string;
  /** `--key-service-ca/-cert/-key`: all three or none. */
  keyServiceTlsPaths: { ca: string; cert: string; key: string } | undefined;
  denyListPath: string | undefined;
  /** `--receipt-key` and `--receipt-retired-jwks`. */
  receiptKeyPath: string | undefined;
  receiptRetiredJwksPath: string | undefined;
  /** `--state-dir`, `--evidence-store`, `--evidence-retention`, `--evidence-max-age-days`. */
  stateDir: string | undefined;
  evidenceStore: 'file' | 'cluster' | undefined;
  /** `--refusal-events`. */
  refusalEvents: boolean;
  evidenceMaxRecords: number;
  evidenceMaxAgeMs: number;
  listen: ListenAddress;
  httpListen: ListenAddress;
  grpcHealthListen: ListenAddress | undefined;
  kubeconfigPath: string | undefined;
  /** `--admin-conf`: only when given (default: the hash of `<pki-dir>/ca.crt`). */
  adminConfPath: string | undefined;
  pkiDir: string;
  apiServerEndpoint: string | undefined;
  metadataUrl: string | undefined;
  cloudApiEndpoint: string | undefined;
  cloudAuthTokenFile: string | undefined;
  azureAkRootsPath: string | undefined;
  qemuAkRegistryPath: string | undefined;
  amdKdsUrl: string | undefined;
  /** `--tdx-collateral` when it names a directory (kept for callers of the directory form). */
  tdxCollateralDir: string | undefined;
  /** `--tdx-collateral`: a directory or Intel PCS. */
  tdxCollateral: TdxCollateralSource | undefined;
  ratePerSecond: number;
  maxConcurrent: number;
  /** `--memory-budget-mib`. */
  memoryBudgetMib: number;
  shutdownGraceMs: number;
  /** `--allow-weak-measurement-policy` (or its older name `--allow-unenforced-measurements`). */
  allowWeakMeasurementPolicy: boolean;
  /** `--trust-ak-as-carried`. */
  trustAkAsCarried: boolean;
  /** `--measurement-set-expiry-warning`, in ms. */
  setExpiryWarningMs: number;
  /** The attested TLS listener's admission settings (deadlines and caps), from their flags. */
  admission: AdmissionSettings;
  logLevel: string;
}

/**
 * Parses and checks `argv`. Returns undefined after printing help.
 * @throws UsageError for unknown, missing or malformed flags, an unknown CSP, or a variant that
 *   production cannot select (`dummy`)
 */
export function parseJoinServiceFlags(
  argv: string[],
  out?: NodeJS.WritableStream,
): JoinServiceFlags | undefined {
  const v = parseCommand(argv, joinServiceCommand, out);
  if (v === undefined) return undefined;
  const str = (k: string) => v[k] as string | undefined;
  const csp = str('csp') as string;
  if (!isCloud(csp)) throw new UsageError(`--csp: want one of ${cloudNames().join(', ')}, got "${csp}"`);
  const variant = str('attestation-variant') as string;
  if (!isVariant(variant))
    throw new UsageError(
      `--attestation-variant: want one of ${variantNames().join(', ')}, got "${variant}"${variant === 'dummy' ? ' (dummy is for tests only)' : ''}`,
    );
  const apiServerEndpoint = str('api-server-endpoint');
  if (apiServerEndpoint !== undefined) parseHostPort('api-server-endpoint', apiServerEndpoint);
  const keyServiceEndpoint = str('key-service-endpoint') as string;
  parseHostPort('key-service-endpoint', keyServiceEndpoint);
  const tlsFlags = ['key-service-ca', 'key-service-cert', 'key-service-key'];
  const tlsGiven = tlsFlags.filter((f) => str(f) !== undefined);
  if (tlsGiven.length > 0 && tlsGiven.length < tlsFlags.length)
    throw new UsageError(
      `mutual TLS to the key service needs all of --${tlsFlags.join(', --')}; missing --${tlsFlags.filter((f) => !tlsGiven.includes(f)).join(', --')}`,
    );
  const logLevel = str('log-level') as string;
  if (!LOG_LEVELS.includes(logLevel))
    throw new UsageError(`--log-level: want one of ${LOG_LEVELS.join(', ')}, got "${logLevel}"`);
  const grpcHealth = str('grpc-health-listen');
  const tdxCollateral = parseTdxCollateralFlag(str('tdx-collateral'), str('tdx-root-crl-url'));
  return {
    csp: csp as JoinServiceCsp,
    variant: variant as Variant,
    attestationConfigPath: str('attestation-config') as string,
    measurementSaltPath: str('measurement-salt-file') as string,
    keyServiceEndpoint,
    keyServiceTlsPaths:
      tlsGiven.length === 0
        ? undefined
        : {
            ca: str('key-service-ca') as string,
            cert: str('key-service-cert') as string,
            key: str('key-service-key') as string,
          },
    denyListPath: str('deny-list'),
    receiptKeyPath: str('receipt-key'),
    receiptRetiredJwksPath: str('receipt-retired-jwks'),
    stateDir: str('state-dir'),
    evidenceStore: parseEvidenceStore(str('evidence-store'), str('state-dir')),
    refusalEvents: parseOnOff('refusal-events', str('refusal-events') as string),
    evidenceMaxRecords: parsePositive('evidence-retention', str('evidence-retention') as string),
    evidenceMaxAgeMs:
      parsePositive('evidence-max-age-days', str('evidence-max-age-days') as string) * 24 * 3600 * 1000,
    listen: parseHostPort('listen', str('listen') as string),
    httpListen: parseHostPort('http-listen', str('http-listen') as string),
    grpcHealthListen: grpcHealth === undefined ? undefined : parseHostPort('grpc-health-listen', grpcHealth),
    kubeconfigPath: str('kubeconfig'),
    adminConfPath: str('admin-conf'),
    pkiDir: str('pki-dir') as string,
    apiServerEndpoint,
    metadataUrl: str('metadata-url'),
    cloudApiEndpoint: str('cloud-api-endpoint'),
    cloudAuthTokenFile: str('cloud-auth-token-file'),
    azureAkRootsPath: str('azure-ak-roots'),
    qemuAkRegistryPath: str('qemu-ak-registry'),
    amdKdsUrl: str('amd-kds-url'),
    tdxCollateralDir: tdxCollateral?.kind === 'dir' ? tdxCollateral.dir : undefined,
    tdxCollateral,
    ratePerSecond: parseRateLimit(str('rate-limit') as string),
    maxConcurrent: parseCount('max-concurrent', str('max-concurrent') as string),
    memoryBudgetMib: parseMemoryBudget(str('memory-budget-mib') as string),
    shutdownGraceMs: parseCount('shutdown-grace', str('shutdown-grace') as string),
    allowWeakMeasurementPolicy:
      v['allow-weak-measurement-policy'] === true || v['allow-unenforced-measurements'] === true,
    trustAkAsCarried: v['trust-ak-as-carried'] === true,
    setExpiryWarningMs:
      parsePositive('measurement-set-expiry-warning', str('measurement-set-expiry-warning') as string) *
      3_600_000,
    admission: parseAdmissionFlags(v),
    logLevel,
  };
}
