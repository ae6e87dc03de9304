/**
 * Field readers the SEV-SNP and TDX attestation-config parsers share (snp/config.ts, tdx/config.ts).
 * Each fails closed with an `invalid-argument` error naming the variant and the field: an unknown
 * field (a typo must not silently drop a check), a missing trust anchor, a wrong length, `"latest"`.
 */
import type { X509Certificate } from 'node:crypto';
import { ConfbootError, messageOf } from '../../../ports/errors.js';
import type { Measurements } from '../../../ports/types.js';
import { loadCertificate } from './certs.js';

/** The error for `field` of `variant`'s config. */
export function invalidField(
  variant: string,
  field: string,
  problem: string,
  cause?: unknown,
): ConfbootError {
  return new ConfbootError(
    'invalid-argument',
    `invalid ${variant} attestation config: ${field}: ${problem}`,
    cause === undefined ? {} : { cause },
  );
}

/** Refuses any field of `raw` not in `allowed`. */
export function checkFields(
  variant: string,
  raw: Record<string, unknown>,
  allowed: ReadonlySet<string>,
): void {
  for (const key of Object.keys(raw))
    if (!allowed.has(key))
      throw invalidField(variant, key, `unknown field (accepted: ${[...allowed].join(', ')})`);
}

/** A required version number 0…`max` (upstream's `"latest"` is refused). */
export function version(variant: string, raw: Record<string, unknown>, field: string, max: number): number {
  const v = raw[field];
  if (v === 'latest')
    throw invalidField(
      variant,
      field,
      '"latest" is resolved by upstream\'s version API, which confboot does not use; give the minimum as a number',
    );
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > max)
    throw invalidField(variant, field, `want an integer 0…${max}, got ${JSON.stringify(v)}`);
  return v;
}

/** {@link version} for a field that may be absent. */
export function optionalVersion(
  variant: string,
  raw: Record<string, unknown>,
  field: string,
  max: number,
): number | undefined {
  return raw[field] === undefined ? undefined : version(variant, raw, field, max);
}

/** Exactly `length` bytes written as hex. */
export function hexBytes(variant: string, field: string, v: unknown, length: number): Uint8Array {
  if (typeof v !== 'string' || !/^(?:[0-9a-fA-F]{2})*$/.test(v) || v.length !== 2 * length)
    throw invalidField(variant, field, `want ${length} bytes of hex, got ${JSON.stringify(v)}`);
  return Uint8Array.from(Buffer.from(v, 'hex'));
}

/** A required PEM certificate: a trust anchor, so it has no default. */
export function pemField(
  variant: string,
  raw: Record<string, unknown>,
  field: string,
  what: string,
): X509Certificate {
  const v = raw[field];
  if (typeof v !== 'string' || v.trim() === '')
    throw invalidField(variant, field, `missing: the ${what} (PEM) is a trust anchor and has no default`);
  try {
    return loadCertificate(v, what);
  } catch (err) {
    throw invalidField(variant, field, messageOf(err), err);
  }
}

/** Every expected value has `length` bytes: 48 for TDX MRTD/RTMRs, 32 for SHA-256 PCRs. */
export function checkMeasurementLength(variant: string, measurements: Measurements, length: number): void {
  for (const [index, m] of measurements)
    if (m.expected.length !== length)
      throw invalidField(
        variant,
        'measurements',
        `index ${index} has ${m.expected.length} bytes; ${variant} measures ${length === 48 ? 'MRTD/RTMRs (48 bytes)' : 'SHA-256 PCRs (32 bytes)'}`,
      );
}
