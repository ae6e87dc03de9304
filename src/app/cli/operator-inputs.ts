/**
 * What the operator's commands that send the master secret (or a share of it) to a node read the
 * same way: `confboot init`, `confboot recover` and `confboot apply`. The variant and timeout flags,
 * the attestation config (a validator, and the measurement-policy guard: the secret goes only to a
 * node whose attestation proves its image), and the master-secret file `{"key","salt"}`.
 */
import { readFile } from 'node:fs/promises';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { messageOf } from '../../ports/errors.js';
import type { Validator } from '../../ports/validator.js';
import type { Variant } from '../../ports/variant.js';
import { type OptionSpec, UsageError } from '../program/args.js';
import { isVariant, variantNames } from '../registry/index.js';
import { checkMeasurementPolicy } from '../registry/policy-guard.js';
import { buildValidator } from '../registry/validators.js';

/** `--allow-weak-measurement-policy` of a command that sends `what` to an attested node. */
export function allowWeakPolicyOption(what: string): OptionSpec {
  return {
    type: 'boolean',
    description: `INSECURE: send ${what} even though the attestation config enforces no boot-chain register of the variant at a measured value, or not the node-lock register (PCR 15; RTMR 2 for qemu-tdx) as zero (refused otherwise, exit 2)`,
  };
}

/** The `--variant` flag: a registry variant, never the test-only dummy. */
export function variantFlag(value: unknown): Variant {
  const variant = String(value);
  if (variant === 'dummy') throw new UsageError('the dummy variant is for tests only');
  if (!isVariant(variant))
    throw new UsageError(
      `unknown attestation variant ${JSON.stringify(variant)} (want one of ${variantNames().join(', ')})`,
    );
  return variant;
}

/** The `--timeout-seconds` flag in ms. */
export function timeoutFlagMs(value: unknown): number {
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new UsageError('--timeout-seconds must be > 0');
  return seconds * 1000;
}

/**
 * The validator for `--attestation-config` at `path`, after the measurement-policy guard (a weak
 * policy is a usage error unless `allowWeak`; then the warning goes to stderr with `prefix`).
 */
export async function operatorValidator(
  variant: Variant,
  path: string,
  allowWeak: boolean,
  prefix: string,
): Promise<Validator> {
  try {
    const config = await readFile(path);
    const validator = buildValidator(variant, config, { clock: new SystemClock() });
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
