/**
 * Measurements policy, upstream's format and rules. The join service and `confboot init` read the expected
 * measurements from the attestation config; every validator compares the measured PCRs (or TDX
 * MRTD/RTMRs) through the same policy, so a variant cannot apply its own rules. Parsing fails closed:
 * anything that is not a well-formed, non-empty measurements map is an error.
 */
import { AttestationError, ConfbootError } from '../ports/errors.js';
import {
  isWithinValidity,
  type MeasurementPolicy,
  type MeasurementSetValidity,
  type MeasurementVerdict,
} from '../ports/measurement-policy.js';
import type { Measurement, MeasurementMismatch, Measurements } from '../ports/types.js';

/** Length of a SHA-256 PCR value. */
export const PCR_MEASUREMENT_LENGTH = 32;
/** Length of a TDX MRTD/RTMR value (SHA-384). */
export const TDX_MEASUREMENT_LENGTH = 48;
/** Highest PCR index accepted in a PCR (32-byte) measurements map. */
export const MAX_PCR_INDEX = 31;
/** Highest index accepted in a TDX (48-byte) measurements map (upstream keys are uint32). */
export const MAX_UINT32 = 0xffff_ffff;

const INDEX_RE = /^(0|[1-9][0-9]*)$/;
const HEX_RE = /^(?:[0-9a-fA-F]{2})*$/;
const MEASUREMENT_KEYS = new Set(['expected', 'warnOnly']);

function invalid(message: string): ConfbootError {
  return new ConfbootError('invalid-argument', `invalid measurements: ${message}`);
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

function parseJsonText(json: unknown, what: string): unknown {
  if (typeof json !== 'string') return json;
  try {
    return JSON.parse(json);
  } catch (err) {
    throw new ConfbootError('invalid-argument', `invalid ${what}: not JSON`, { cause: err });
  }
}

function hexToBytes(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = Number.parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return out;
}

/** Lower-case hex of `bytes`. */
export function toHex(bytes: Uint8Array): string {
  let s = '';
  for (const b of bytes) s += b.toString(16).padStart(2, '0');
  return s;
}

function parseEntry(key: string, value: unknown): Measurement {
  let expectedHex: unknown;
  let warnOnly: unknown = false;
  if (typeof value === 'string') {
    // Legacy format: a plain hex string, always enforced.
    expectedHex = value;
  } else if (isPlainObject(value)) {
    const unknownKey = Object.keys(value).find((k) => !MEASUREMENT_KEYS.has(k));
    // A misspelt "warnOnly" must not silently change what is enforced.
    if (unknownKey !== undefined) throw invalid(`index ${key}: unknown field ${JSON.stringify(unknownKey)}`);
    expectedHex = value.expected;
    if ('warnOnly' in value) warnOnly = value.warnOnly;
  } else {
    throw invalid(`index ${key}: expected an object {"expected", "warnOnly"} or a hex string`);
  }
  if (typeof expectedHex !== 'string') throw invalid(`index ${key}: "expected" must be a hex string`);
  if (typeof warnOnly !== 'boolean') throw invalid(`index ${key}: "warnOnly" must be a boolean`);
  if (!HEX_RE.test(expectedHex)) throw invalid(`index ${key}: "expected" is not hex`);
  const expected = hexToBytes(expectedHex);
  if (expected.length !== PCR_MEASUREMENT_LENGTH && expected.length !== TDX_MEASUREMENT_LENGTH) {
    throw invalid(
      `index ${key}: expected value has ${expected.length} bytes, need ${PCR_MEASUREMENT_LENGTH} or ${TDX_MEASUREMENT_LENGTH}`,
    );
  }
  return { expected, warnOnly };
}

/**
 * Parses a measurements map `{"<idx>": {"expected": "<hex>", "warnOnly": bool}}` (a JSON value or
 * JSON text). A legacy plain hex string is an enforced measurement. Every expected value must be 32
 * (PCR) or 48 (TDX) bytes and all must have the same length; a PCR index is at most 31, a TDX index
 * any uint32. Throws `invalid-argument` naming the index for anything else, and for an empty map.
 */
export function parseMeasurements(json: unknown): Measurements {
  const value = parseJsonText(json, 'measurements');
  if (!isPlainObject(value)) throw invalid('expected an object mapping indices to measurements');
  const entries = Object.entries(value);
  if (entries.length === 0) throw invalid('no measurements given (an empty policy would accept anything)');
  const parsed: Array<[number, Measurement, string]> = [];
  for (const [key, entry] of entries) {
    if (!INDEX_RE.test(key)) throw invalid(`index ${JSON.stringify(key)} is not a non-negative integer`);
    parsed.push([Number(key), parseEntry(key, entry), key]);
  }
  const length = parsed[0]![1].expected.length;
  const maxIndex = length === PCR_MEASUREMENT_LENGTH ? MAX_PCR_INDEX : MAX_UINT32;
  const out: Measurements = new Map();
  for (const [index, m, key] of parsed.sort((a, b) => a[0] - b[0])) {
    if (m.expected.length !== length) {
      throw invalid(`index ${key}: expected value has ${m.expected.length} bytes, others have ${length}`);
    }
    if (index > maxIndex) throw invalid(`index ${key} is out of range (at most ${maxIndex})`);
    out.set(index, m);
  }
  return out;
}

/**
 * One reference set: a measurements map, optionally named and bounded in time. A document is
 * accepted when one set that is valid at the time of validation matches.
 */
export interface MeasurementSet {
  /** The set's name; undefined for the unnamed set of a plain `measurements` config. */
  name: string | undefined;
  /** Valid from this instant on (inclusive); undefined: always was. */
  notBefore: Date | undefined;
  /** Valid until this instant (exclusive); undefined: never expires. */
  expires: Date | undefined;
  measurements: Measurements;
}

/** A parsed attestation config: the measurements plus the whole object for variant-specific fields. */
export interface ParsedAttestationConfig {
  /** The first (or only) set's measurements; every set's values have the same length. */
  measurements: Measurements;
  /** Every reference set, in the config's order (one unnamed set for a plain `measurements` map). */
  sets: MeasurementSet[];
  /** The config object; for a bare measurements map this is `{ measurements: <map> }`. */
  raw: Record<string, unknown>;
}

const SET_KEYS = new Set(['name', 'notBefore', 'expires', 'measurements']);
const SET_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;
const RFC3339_RE = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

function invalidSet(which: string, message: string): ConfbootError {
  return new ConfbootError(
    'invalid-argument',
    `invalid attestation config: measurementSets ${which}: ${message}`,
  );
}

function parseInstant(which: string, field: string, value: unknown): Date | undefined {
  if (value === undefined) return undefined;
  const ms = typeof value === 'string' && RFC3339_RE.test(value) ? Date.parse(value) : Number.NaN;
  if (Number.isNaN(ms))
    throw invalidSet(which, `${field} must be an RFC 3339 time, e.g. 2026-12-01T00:00:00Z`);
  return new Date(ms);
}

/** Parses `measurementSets`: a non-empty list of `{name, notBefore?, expires?, measurements}`. */
function parseMeasurementSets(value: unknown): MeasurementSet[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new ConfbootError(
      'invalid-argument',
      'invalid attestation config: measurementSets must be a non-empty list of {"name", "measurements", "notBefore", "expires"}',
    );
  const names = new Set<string>();
  const sets = value.map((entry, i): MeasurementSet => {
    const which = `[${i}]`;
    if (!isPlainObject(entry)) throw invalidSet(which, 'expected an object');
    const unknownKey = Object.keys(entry).find((k) => !SET_KEYS.has(k));
    if (unknownKey !== undefined) throw invalidSet(which, `unknown field ${JSON.stringify(unknownKey)}`);
    const name = entry.name;
    if (typeof name !== 'string' || !SET_NAME_RE.test(name))
      throw invalidSet(
        which,
        'name must be 1-63 letters, digits, ".", "_" or "-", starting with a letter or digit',
      );
    if (names.has(name)) throw invalidSet(which, `name ${JSON.stringify(name)} is used twice`);
    names.add(name);
    const named = `${which} (${name})`;
    const notBefore = parseInstant(named, 'notBefore', entry.notBefore);
    const expires = parseInstant(named, 'expires', entry.expires);
    if (notBefore !== undefined && expires !== undefined && expires <= notBefore)
      throw invalidSet(named, 'expires must be after notBefore');
    let measurements: Measurements;
    try {
      measurements = parseMeasurements(entry.measurements);
    } catch (err) {
      throw invalidSet(named, (err as Error).message);
    }
    return { name, notBefore, expires, measurements };
  });
  const length = valueLength(sets[0]!.measurements);
  const other = sets.find((s) => valueLength(s.measurements) !== length);
  if (other !== undefined)
    throw invalidSet(
      `(${other.name})`,
      `values have ${valueLength(other.measurements)} bytes, the first set's ${length}`,
    );
  return sets;
}

function valueLength(m: Measurements): number {
  return m.values().next().value?.expected.length ?? 0;
}

function unnamed(measurements: Measurements): MeasurementSet[] {
  return [{ name: undefined, notBefore: undefined, expires: undefined, measurements }];
}

/**
 * Parses an attestation config (`/var/config/attestationConfig`): an object with a `measurements`
 * field (one unnamed set) or a `measurementSets` list (named sets, each with an optional RFC 3339
 * `notBefore`/`expires`), or a bare measurements map. Accepts a JSON value or JSON text; fails closed
 * like {@link parseMeasurements}.
 */
export function parseAttestationConfig(json: unknown): ParsedAttestationConfig {
  const value = parseJsonText(json, 'attestation config');
  if (!isPlainObject(value))
    throw new ConfbootError('invalid-argument', 'invalid attestation config: expected an object');
  if ('measurementSets' in value) {
    if ('measurements' in value)
      throw new ConfbootError(
        'invalid-argument',
        'invalid attestation config: give either measurements or measurementSets, not both',
      );
    const sets = parseMeasurementSets(value.measurementSets);
    return { measurements: sets[0]!.measurements, sets, raw: value };
  }
  if ('measurements' in value) {
    const measurements = parseMeasurements(value.measurements);
    return { measurements, sets: unnamed(measurements), raw: value };
  }
  const measurements = parseMeasurements(value);
  return { measurements, sets: unnamed(measurements), raw: { measurements: value } };
}

/** Whether `set` is valid at `now`: not before its `notBefore`, and before its `expires`. */
export function isSetValidAt(set: MeasurementSet, now: Date): boolean {
  return isWithinValidity(set, now);
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}

/**
 * Compares measured values with the expected ones. Returns every mismatch in ascending index order,
 * warnOnly ones included; a missing value is a mismatch with `actual: undefined`. Extra actual
 * values are ignored.
 */
export function compareMeasurements(
  expected: Measurements,
  actual: Map<number, Uint8Array>,
): MeasurementMismatch[] {
  const mismatches: MeasurementMismatch[] = [];
  for (const index of [...expected.keys()].sort((a, b) => a - b)) {
    const want = expected.get(index)!;
    const got = actual.get(index);
    if (got === undefined || !bytesEqual(want.expected, got)) {
      mismatches.push({
        index,
        expected: new Uint8Array(want.expected),
        actual: got,
        warnOnly: want.warnOnly,
      });
    }
  }
  return mismatches;
}

/** The enforced mismatches of `mismatches` (those that must fail validation). */
export function enforcedMismatches(mismatches: MeasurementMismatch[]): MeasurementMismatch[] {
  return mismatches.filter((m) => !m.warnOnly);
}

/** The measurement policy built from the attestation config and handed to every validator. */
export class MeasurementsPolicy implements MeasurementPolicy {
  readonly #sets: MeasurementSet[];
  readonly #now: () => Date;

  /**
   * Copies `measurements` (one unnamed, always valid set) or `sets` (checked against `clock`, the
   * system time by default); throws `invalid-argument` when a map is empty (fail closed).
   */
  constructor(measurements: Measurements | readonly MeasurementSet[], clock?: { now(): Date }) {
    const sets = measurements instanceof Map ? unnamed(measurements) : [...measurements];
    if (sets.length === 0 || sets.some((s) => s.measurements.size === 0))
      throw invalid('no measurements given (an empty policy would accept anything)');
    this.#sets = sets.map((s) => ({ ...s, measurements: copy(s.measurements) }));
    this.#now = clock ? () => clock.now() : () => new Date();
  }

  /** A copy of the expected measurements of the first set. */
  get measurements(): Measurements {
    return copy(this.#sets[0]!.measurements);
  }

  /**
   * See {@link MeasurementPolicy.compare}. When no set is valid now there is nothing to compare
   * with: throws an AttestationError (`measurement-set-expired`), so a caller that reads only the
   * mismatches still refuses.
   */
  compare(actual: Map<number, Uint8Array>): MeasurementMismatch[] {
    const verdict = this.evaluate(actual);
    if (!verdict.matched && !this.#sets.some((s) => isSetValidAt(s, this.#now())))
      throw new AttestationError('measurement-set-expired', 'no measurement set is valid now');
    return verdict.mismatches;
  }

  /** See {@link MeasurementPolicy.evaluate}: sets valid now, in order; the first that matches wins. */
  evaluate(actual: Map<number, Uint8Array>): MeasurementVerdict {
    const now = this.#now();
    let closest: { mismatches: MeasurementMismatch[]; enforced: number } | undefined;
    const outsideValidity: string[] = [];
    for (const set of this.#sets) {
      const mismatches = compareMeasurements(set.measurements, actual);
      const enforced = mismatches.filter((m) => !m.warnOnly).length;
      if (!isSetValidAt(set, now)) {
        if (enforced === 0) outsideValidity.push(set.name ?? '(unnamed)');
        continue;
      }
      if (enforced === 0)
        return { matched: true, set: set.name, mismatches, outsideValidity: [], ...validityOf(set) };
      if (closest === undefined || enforced < closest.enforced) closest = { mismatches, enforced };
    }
    return { matched: false, set: undefined, mismatches: closest?.mismatches ?? [], outsideValidity };
  }
}

/** The validity window of `set` as a verdict carries it; nothing for a set without bounds. */
function validityOf(set: MeasurementSet): { validity?: MeasurementSetValidity } {
  if (set.notBefore === undefined && set.expires === undefined) return {};
  return {
    validity: {
      ...(set.notBefore === undefined ? {} : { notBefore: new Date(set.notBefore) }),
      ...(set.expires === undefined ? {} : { expires: new Date(set.expires) }),
    },
  };
}

function copy(m: Measurements): Measurements {
  return new Map([...m].map(([i, e]) => [i, { expected: new Uint8Array(e.expected), warnOnly: e.warnOnly }]));
}
