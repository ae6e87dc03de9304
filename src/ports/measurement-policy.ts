import type { MeasurementMismatch } from './types.js';

/**
 * Compares measured values (PCRs, or MRTD/RTMRs) with the expected ones. Built by the domain from
 * the attestation config and handed to validators, so every variant applies the same rules.
 */
export interface MeasurementPolicy {
  /**
   * Returns every mismatch in ascending index order, warnOnly ones included; missing values count as
   * mismatches. Extra actual values are ignored.
   */
  compare(actual: Map<number, Uint8Array>): MeasurementMismatch[];
}

/** DI token for {@link MeasurementPolicy}. */
export const MeasurementPolicy = Symbol.for('confboot.MeasurementPolicy');
