/**
 * What the operator's commands that send the master secret (or a share of it) to a node read the
 * same way: `confboot init`, `confboot recover` and `confboot apply`. The variant and timeout options,
 * the attestation config (a validator, and the measurement-policy guard: the secret goes only to a
 * node whose attestation proves its image), the attestation-key trust (the variant's lookups, built
 * by its registry entry from the same settings as the join service's, so qemu-vtpm without
 * registered attestation keys is refused unless `--trust-ak-as-carried`), and the master-secret file
 * `{"key","salt"}`.
 */
import { readFile } from 'node:fs/promises';
import { parseComponentList } from '../../adapters/components/component-list.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { isConfbootError, messageOf } from '../../ports/errors.js';
import type { Component } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import type { Variant } from '../../ports/variant.js';
import { UsageError } from '../program/args.js';
import { duration, type OptionValues } from '../program/options.js';
import { variantOption } from '../program/shared-options.js';
import { variantEntry } from '../registry/index.js';
import { checkMeasurementPolicy } from '../registry/policy-guard.js';
import {
  QEMU_AK_AS_CARRIED_WARNING,
  type VariantLookupSettings,
  type VariantLookups,
} from '../registry/validator-deps.js';
import { buildValidator } from '../registry/validators.js';

/** `--allow-weak-measurement-policy` of a command that sends `what` to an attested node. */
export function allowWeakPolicyOption(what: string) {
  return {
    type: 'boolean',
    description: `INSECURE: send ${what} even though the attestation config enforces no boot-chain register of the variant at a measured value, or not the node-lock register (PCR 15; RTMR 2 for qemu-tdx) as zero (refused otherwise, exit 2)`,
  } as const;
}

/**
 * The `--variant` option of a command that sends a secret: required, since the variant decides how
 * the node's attestation key is trusted (no default sends a secret under the weakest rule).
 */
export function secretVariantOption() {
  return variantOption({ required: true, what: 'attestation variant of the node' });
}

/**
 * `--timeout DURATION` (also `--timeout-seconds`, whose bare number counts seconds): the bound on
 * `what`, default `defaultText`.
 */
export function timeoutOption(what: string, defaultText: string) {
  return {
    type: 'string',
    valueName: 'DURATION',
    default: defaultText,
    aliases: ['timeout-seconds'],
    description: `bound on ${what}; a bare number counts seconds`,
    parse: duration('s', 1),
  } as const;
}

/** `--ready-timeout DURATION` (also `--ready-timeout-seconds`): the bound on waiting for `what`. */
export function readyTimeoutOption(what: string) {
  return {
    type: 'string',
    valueName: 'DURATION',
    default: '5m',
    aliases: ['ready-timeout-seconds'],
    description: `bound on waiting for ${what}; a bare number counts seconds`,
    parse: duration('s', 1),
  } as const;
}

/** The Kubernetes components of `--components F` (none without it); a bad list is a usage error. */
export async function readComponents(path: string | undefined): Promise<Component[]> {
  if (path === undefined) return [];
  try {
    return parseComponentList(await readFile(path, 'utf8'), `--components ${path}`);
  } catch (err) {
    throw new UsageError(messageOf(err));
  }
}

/** `--qemu-ak-registry`: registered attestation keys, as the join service reads them. */
export const QEMU_AK_REGISTRY_OPTION = {
  type: 'string',
  valueName: 'F',
  description:
    'qemu-vtpm: JSON file {"<name>": {"ip": "<address>", "attestationKeyPublic": "<base64 TPMT_PUBLIC>"}} (the metadata server\'s --identities file, as the join service reads it); the node is accepted only with the AK registered for its address (required for qemu-vtpm unless --trust-ak-as-carried)',
} as const;

/** `--trust-ak-as-carried`: the join service's explicit opt-in to upstream's qemu-vtpm AK trust. */
export const TRUST_AK_AS_CARRIED_OPTION = {
  type: 'boolean',
  description:
    'INSECURE: qemu-vtpm without --qemu-ak-registry: trust whatever attestation key the document carries, so a software TPM extended to the expected values passes (refused otherwise, exit 2; a SECURITY line is printed)',
} as const;

/** The attestation-key trust flags of `confboot init` and `confboot recover`. */
export const AK_TRUST_OPTIONS = {
  'qemu-ak-registry': QEMU_AK_REGISTRY_OPTION,
  'trust-ak-as-carried': TRUST_AK_AS_CARRIED_OPTION,
  'azure-ak-roots': {
    type: 'string',
    valueName: 'F',
    description: 'azure-trustedlaunch: PEM file with the trusted AK root certificates (required for it)',
  },
} as const;

/** The lookup settings of {@link AK_TRUST_OPTIONS} from parsed flag values. */
export function akTrustSettings(values: OptionValues<typeof AK_TRUST_OPTIONS>): VariantLookupSettings {
  return {
    qemuAkRegistryPath: values['qemu-ak-registry'],
    trustAkAsCarried: values['trust-ak-as-carried'],
    azureAkRootsPath: values['azure-ak-roots'],
  };
}

/**
 * The lookups the validator of `variant` needs (AK trust, cloud lookups), built by the variant's
 * registry entry from `settings` exactly as the join service builds them. A refusal of the settings
 * (qemu-vtpm without registered attestation keys and without `trustAkAsCarried`, azure-trustedlaunch
 * without roots) is a usage error; qemu-vtpm trusting the AK as carried prints a SECURITY line to
 * stderr with `prefix`. Nothing is contacted: the cloud lookups ask only once a document needs them.
 */
export async function operatorLookups(
  variant: Variant,
  settings: VariantLookupSettings,
  prefix: string,
): Promise<VariantLookups> {
  let lookups: VariantLookups;
  try {
    lookups = await variantEntry(variant).lookups(settings, new SystemClock());
  } catch (err) {
    if (isConfbootError(err) && err.code === 'invalid-argument') throw new UsageError(err.message);
    throw err;
  }
  if (variant === 'qemu-vtpm' && lookups.qemuAkTrust === undefined)
    process.stderr.write(`${prefix}: ${QEMU_AK_AS_CARRIED_WARNING}\n`);
  return lookups;
}

/**
 * The validator for `--attestation-config` at `path` with the AK trust of `akTrust`
 * ({@link operatorLookups}: refused settings are a usage error), after the measurement-policy guard
 * (a weak policy is a usage error unless `allowWeak`; then the warning goes to stderr with `prefix`).
 */
export async function operatorValidator(
  variant: Variant,
  path: string,
  allowWeak: boolean,
  prefix: string,
  akTrust: VariantLookupSettings,
): Promise<Validator> {
  const lookups = await operatorLookups(variant, akTrust, prefix);
  try {
    const config = await readFile(path);
    const validator = buildValidator(variant, config, { clock: new SystemClock(), ...lookups });
    const accepted = checkMeasurementPolicy(variant, config, allowWeak);
    if (accepted !== undefined) process.stderr.write(`${prefix}: ${accepted}\n`);
    return validator;
  } catch (err) {
    throw new UsageError(`reading --attestation-config: ${messageOf(err)}`);
  }
}

/** The master secret and its salt from the JSON `{"key","salt"}` (base64) of `--master-secret-file`. */
export function parseMasterSecretFile(content: Uint8Array | string): {
  masterSecret: Buffer;
  masterSalt: Buffer;
} {
  let master: { key?: unknown; salt?: unknown };
  try {
    master = JSON.parse(typeof content === 'string' ? content : new TextDecoder().decode(content));
  } catch {
    throw new UsageError('--master-secret-file is not JSON {"key","salt"}');
  }
  if (typeof master?.key !== 'string' || typeof master.salt !== 'string')
    throw new UsageError('--master-secret-file must hold base64 "key" and "salt"');
  const masterSecret = Buffer.from(master.key, 'base64');
  const masterSalt = Buffer.from(master.salt, 'base64');
  if (masterSecret.length < 16 || masterSalt.length < 32)
    throw new UsageError('--master-secret-file: key must be ≥ 16 bytes and salt ≥ 32 bytes');
  return { masterSecret, masterSalt };
}
