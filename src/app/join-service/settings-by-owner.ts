/**
 * The join service's settings by owner: its parsed options (the tables of settings.ts) read into one
 * group per owner, each handed whole to the code it configures (production.ts), with the checks that
 * span several options.
 */
import { parseTdxCollateralSource, type TdxCollateralSource } from '../../adapters/attestation/tdx/config.js';
import {
  ADMISSION_SETTINGS,
  type AdmissionSettingName,
  type AdmissionSettings,
  admissionSettingsFrom,
} from '../../adapters/grpc/atls/admission-settings.js';
import { messageOf } from '../../ports/errors.js';
import { UsageError } from '../program/args.js';
import { type OptionGroup, optionGroup } from '../program/options.js';
import type { LogLevel } from '../program/shared-options.js';
import {
  type AdmissionFlag,
  ATTESTATION_SETTINGS,
  CLOUD_SETTINGS,
  CLUSTER_SETTINGS,
  EVIDENCE_SETTINGS,
  KEY_SERVICE_SETTINGS,
  LIMIT_SETTINGS,
  LISTEN_SETTINGS,
  RECEIPT_SETTINGS,
} from './settings.js';

/** The listener's admission settings from the parsed admission options. */
export function admissionFrom(values: Readonly<Record<AdmissionFlag, number>>): AdmissionSettings {
  const byName: Partial<Record<AdmissionSettingName, number>> = {};
  for (const [name, s] of Object.entries(ADMISSION_SETTINGS))
    if (name in ADMISSION_SETTINGS) byName[name as AdmissionSettingName] = values[s.flag];
  return admissionSettingsFrom(byName);
}

/** Every setting of the join service, by owner (see the tables above). */
export interface JoinServiceSettings {
  cloud: OptionGroup<typeof CLOUD_SETTINGS>;
  /** `tdxCollateral` read into its source (a directory or Intel PCS) together with `--tdx-root-crl-url`. */
  attestation: Omit<OptionGroup<typeof ATTESTATION_SETTINGS>, 'tdxCollateral'> & {
    tdxCollateral: TdxCollateralSource | undefined;
  };
  cluster: OptionGroup<typeof CLUSTER_SETTINGS>;
  keyService: OptionGroup<typeof KEY_SERVICE_SETTINGS, 'key-service-'>;
  receipts: OptionGroup<typeof RECEIPT_SETTINGS, 'receipt-'>;
  /** `evidenceStore` defaults to `file` when a state directory is given. */
  evidence: OptionGroup<typeof EVIDENCE_SETTINGS>;
  listen: OptionGroup<typeof LISTEN_SETTINGS>;
  limits: OptionGroup<typeof LIMIT_SETTINGS>;
  admission: AdmissionSettings;
  logLevel: LogLevel;
}

/**
 * The settings by owner from the join service's parsed options, with the checks that span options:
 * mutual TLS to the key service needs all three files, a file evidence store a state directory, and
 * `--tdx-root-crl-url` a PCS collateral source.
 * @throws UsageError naming the options
 */
export function joinServiceSettings(
  values: Readonly<Record<string, unknown>> &
    Readonly<Record<AdmissionFlag, number>> & { 'log-level': LogLevel },
): JoinServiceSettings {
  const keyService = optionGroup(values, KEY_SERVICE_SETTINGS, 'key-service-');
  const tls = { ca: keyService.ca, cert: keyService.cert, key: keyService.key };
  const missing = Object.entries(tls).filter(([, v]) => v === undefined);
  if (missing.length > 0 && missing.length < 3)
    throw new UsageError(
      `mutual TLS to the key service needs all of --key-service-ca, --key-service-cert, --key-service-key; missing --${missing.map(([k]) => `key-service-${k}`).join(', --')}`,
    );
  const evidence = optionGroup(values, EVIDENCE_SETTINGS);
  if (evidence.evidenceStore === 'file' && evidence.stateDir === undefined)
    throw new UsageError('--evidence-store=file needs --state-dir');
  const attestation = optionGroup(values, ATTESTATION_SETTINGS);
  return {
    cloud: optionGroup(values, CLOUD_SETTINGS),
    attestation: {
      ...attestation,
      tdxCollateral: tdxCollateralSource(attestation.tdxCollateral, attestation.tdxRootCrlUrl),
    },
    cluster: optionGroup(values, CLUSTER_SETTINGS),
    keyService,
    receipts: optionGroup(values, RECEIPT_SETTINGS, 'receipt-'),
    evidence: {
      ...evidence,
      evidenceStore: evidence.evidenceStore ?? (evidence.stateDir === undefined ? undefined : 'file'),
    },
    listen: optionGroup(values, LISTEN_SETTINGS),
    limits: optionGroup(values, LIMIT_SETTINGS),
    admission: admissionFrom(values),
    logLevel: values['log-level'],
  };
}

/** Reads `--tdx-collateral DIR|pcs|pcs:URL` with `--tdx-root-crl-url URL`. */
export function tdxCollateralSource(
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
