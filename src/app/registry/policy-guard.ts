/**
 * The guard every consumer of an attestation config applies before trusting it: the join service
 * (at start and on every reload) and `confboot init` (before it sends the master secret). A config
 * must enforce something that proves the node's image — at least one boot-chain register of its
 * variant at a measured value — and the node-lock register as zero (src/domain/measurement-guard.ts;
 * the registers come from the variant's registry entry). A config that does not is refused unless
 * the operator opts in with {@link ALLOW_WEAK_POLICY_FLAG}; with the opt-in, every such config is
 * logged at error level each time it is loaded.
 */
import { measurementPolicyWeaknesses } from '../../domain/measurement-guard.js';
import { parseAttestationConfig } from '../../domain/measurements.js';
import { ConfbootError } from '../../ports/errors.js';
import type { Variant } from '../../ports/variant.js';
import { variantEntry } from './index.js';

/** The CLI flag (join service and `confboot init`) that lets a weak measurement policy through. */
export const ALLOW_WEAK_POLICY_FLAG = '--allow-weak-measurement-policy';
/** The join service's older name of {@link ALLOW_WEAK_POLICY_FLAG}, kept so deployments keep starting. */
export const ALLOW_UNENFORCED_FLAG = '--allow-unenforced-measurements';

/** The error-level line with which a service announces at start that the opt-in is set. */
export const WEAK_POLICY_OPT_IN_WARNING = `SECURITY: ${ALLOW_WEAK_POLICY_FLAG} is set: an attestation config that enforces no boot-chain measurement, or not the node-lock register as zero, will be accepted`;

/**
 * Checks an attestation config (JSON bytes or text) of `variant` against the fail-closed rules.
 * Configs the parser refuses are left to the validator builder, which reports them precisely.
 * Returns undefined for a config that keeps the rules, and for a weak one accepted because of
 * `allowWeak` the `SECURITY:` line the caller must log at error level.
 * @throws ConfbootError `invalid-argument` naming every broken rule and {@link ALLOW_WEAK_POLICY_FLAG}
 *   when the config is weak and `allowWeak` is false
 */
export function checkMeasurementPolicy(
  variant: Variant,
  config: Uint8Array | string,
  allowWeak: boolean,
): string | undefined {
  let sets: ReturnType<typeof parseAttestationConfig>['sets'];
  try {
    sets = parseAttestationConfig(
      typeof config === 'string' ? config : Buffer.from(config).toString('utf8'),
    ).sets;
  } catch {
    return undefined;
  }
  // The rules hold per reference set: any one set that matches admits a node.
  const registers = variantEntry(variant).registers;
  const weak = sets
    .map((set) => ({ set, weaknesses: measurementPolicyWeaknesses(set.measurements, registers) }))
    .filter((w) => w.weaknesses.length > 0);
  if (weak.length === 0) return undefined;
  const what = weak
    .map(
      (w) =>
        `the ${variant} attestation config${w.set.name === undefined ? '' : ` (measurement set ${w.set.name})`} proves nothing about the node: ${w.weaknesses.map((x) => x.message).join('; ')}`,
    )
    .join('; ');
  if (!allowWeak)
    throw new ConfbootError(
      'invalid-argument',
      `${what}; refusing it (fix the measurements, or pass ${ALLOW_WEAK_POLICY_FLAG} to accept this knowingly)`,
      { reason: 'weak-measurement-policy' },
    );
  return `SECURITY: ${what}; accepted because ${ALLOW_WEAK_POLICY_FLAG} is set`;
}

/** Default: warn about a measurement set that expires within this many milliseconds (24 hours). */
export const DEFAULT_SET_EXPIRY_WARNING_MS = 24 * 60 * 60 * 1000;

/**
 * The warnings about the reference sets of an attestation config at `now`: each set that has expired
 * (it no longer matches) and each that expires within `warnWithinMs`. Empty for a config without
 * `expires`, and for one that does not parse.
 */
export function measurementSetExpiryWarnings(
  config: Uint8Array | string,
  now: Date,
  warnWithinMs: number = DEFAULT_SET_EXPIRY_WARNING_MS,
): string[] {
  let sets: ReturnType<typeof parseAttestationConfig>['sets'];
  try {
    sets = parseAttestationConfig(
      typeof config === 'string' ? config : Buffer.from(config).toString('utf8'),
    ).sets;
  } catch {
    return [];
  }
  return sets.flatMap((set) => expiryWarning(set, now, warnWithinMs) ?? []);
}

/** The warning about one set at `now`, or undefined when it is not about to expire. */
export function expiryWarning(
  set: { name: string | undefined; expires: Date | undefined },
  now: Date,
  warnWithinMs: number = DEFAULT_SET_EXPIRY_WARNING_MS,
): string | undefined {
  if (set.expires === undefined) return undefined;
  const name = set.name ?? '(unnamed)';
  const left = set.expires.getTime() - now.getTime();
  if (left <= 0)
    return `Measurement set ${name} expired at ${set.expires.toISOString()}: nodes that match only it are refused`;
  if (left <= warnWithinMs)
    return `Measurement set ${name} expires at ${set.expires.toISOString()} (in ${Math.ceil(left / 60_000)} min): nodes that match only it will be refused`;
  return undefined;
}
