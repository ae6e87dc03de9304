import type { MeasurementMismatch } from './types.js';

/** The validity window of a measurement set: valid from `notBefore` (inclusive) until `expires` (exclusive). */
export interface MeasurementSetValidity {
  notBefore?: Date;
  expires?: Date;
}

/** Whether `now` lies in `validity` (an absent bound does not limit). */
export function isWithinValidity(validity: MeasurementSetValidity, now: Date): boolean {
  const t = now.getTime();
  return (
    (validity.notBefore === undefined || t >= validity.notBefore.getTime()) &&
    (validity.expires === undefined || t < validity.expires.getTime())
  );
}

/** How measured values fare against a policy of one or more reference sets. */
export interface MeasurementVerdict {
  /** True when a set that is valid now matches: every enforced value equal. */
  matched: boolean;
  /** The name of the matching set; undefined for an unnamed set, or when none matches. */
  set: string | undefined;
  /** The matching set's validity window, when it has one (checked again when a ticket is issued). */
  validity?: MeasurementSetValidity;
  /**
   * With a match: the warnOnly mismatches of the matching set. Without: every mismatch against the
   * closest set valid now (fewest enforced mismatches, first in order), or none when no set is valid.
   */
  mismatches: MeasurementMismatch[];
  /**
   * Without a match: the names (`(unnamed)` for the unnamed set) of sets that would match but are
   * not valid now (expired or not yet valid). Empty otherwise.
   */
  outsideValidity: string[];
}

/**
 * Compares measured values (PCRs, or MRTD/RTMRs) with the expected ones. Built by the domain from
 * the attestation config and handed to validators, so every variant applies the same rules.
 */
export interface MeasurementPolicy {
  /**
   * Returns every mismatch in ascending index order, warnOnly ones included; missing values count as
   * mismatches. Extra actual values are ignored. With several reference sets: the mismatches of the
   * set {@link evaluate} would report.
   */
  compare(actual: Map<number, Uint8Array>): MeasurementMismatch[];
  /**
   * The full verdict, for policies with named reference sets and validity windows. A policy without
   * it is one unnamed set that is always valid: matched when `compare` has no enforced mismatch.
   */
  evaluate?(actual: Map<number, Uint8Array>): MeasurementVerdict;
}

/** DI token for {@link MeasurementPolicy}. */
export const MeasurementPolicy = Symbol.for('confboot.MeasurementPolicy');

/** Length of a TDX MRTD/RTMR value; PCR values are shorter. */
const TDX_REGISTER_BYTES = 48;

/**
 * The one text of a measurement mismatch, in logs, audit records, errors and CLI output:
 * `PCR12: expected <hex>, got <hex>` (`got nothing` when the value is missing, ` (warnOnly)` appended
 * for a tolerated one); a TDX value (48 bytes) is named `MRTD` (index 0) or `RTMR<n>` (index n + 1).
 * It carries values, so it is never sent to the peer (which learns only the register's name).
 */
export function formatMismatch(m: MeasurementMismatch): string {
  const register =
    m.expected.length !== TDX_REGISTER_BYTES
      ? `PCR${m.index}`
      : m.index === 0
        ? 'MRTD'
        : `RTMR${m.index - 1}`;
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
  const actual = m.actual === undefined ? 'nothing' : hex(m.actual);
  return `${register}: expected ${hex(m.expected)}, got ${actual}${m.warnOnly ? ' (warnOnly)' : ''}`;
}
