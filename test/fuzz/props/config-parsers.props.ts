/**
 * Fuzz properties of the configuration parsers: the measurements policy and attestation config
 * (src/domain/measurements.ts, ConfbootError invalid-argument), the LUKS2 header JSON validator
 * (src/adapters/disk/luks2-header-policy.ts, Luks2HeaderError only), the QEMU metadata wire instance
 * (src/adapters/cloud/qemu/metadata-api.ts, ConfbootError internal) and the dnsmasq leases parser
 * (src/adapters/cloud/qemu/leases.ts, Error "leases line …"). Inputs: any JavaScript value, random
 * JSON and text, JSON-level edits of valid documents, and megabyte documents.
 */
import fc from 'fast-check';
import { parseLeases } from '../../../src/adapters/cloud/qemu/leases.js';
import { parseWireInstance } from '../../../src/adapters/cloud/qemu/metadata-api.js';
import { validateLuks2Metadata } from '../../../src/adapters/disk/luks2-header-check.js';
import {
  DEFAULT_LUKS2_HEADER_POLICY,
  Luks2HeaderError,
} from '../../../src/adapters/disk/luks2-header-policy.js';
import {
  MAX_PCR_INDEX,
  PCR_MEASUREMENT_LENGTH,
  parseAttestationConfig,
  parseMeasurements,
  TDX_MEASUREMENT_LENGTH,
} from '../../../src/domain/measurements.js';
import type { Measurements } from '../../../src/ports/types.js';
import { fuzzRuns } from '../harness/config.js';
import { edgeJson, FuzzJson, jsonMutated } from '../harness/json.js';
import { fillRandom } from '../harness/mutate.js';
import { callDefined, confbootError, ensure, errorWithPrefix, property } from '../harness/property.js';

// ---- measurements ----

const hex = (n: number, seed = 1) => Buffer.from(fillRandom(new Uint8Array(n), seed)).toString('hex');

function validMeasurements(len: number, indices: number[]): Record<string, unknown> {
  return Object.fromEntries(
    indices.map((i) => [String(i), { expected: hex(len, i + 1), warnOnly: i === 15 }]),
  );
}

const MEASUREMENT_BASES = [
  { name: 'pcr-map', value: validMeasurements(32, [0, 4, 7, 8, 9, 11, 12, 13, 15]) },
  { name: 'tdx-map', value: validMeasurements(48, [0, 1, 2, 3, 4]) },
  { name: 'legacy-hex', value: { 0: hex(32), 4: hex(32, 4) } },
  {
    name: 'attestation-config',
    value: { measurements: validMeasurements(32, [4, 9, 15]), amdRootKey: 'x', bootloaderVersion: 3 },
  },
];

const measurementKey = fc.oneof(
  fc.nat({ max: 40 }).map(String),
  fc.constantFrom(
    '01',
    '-1',
    '1.0',
    '1e1',
    ' 1',
    '4294967295',
    '4294967296',
    '9007199254740993',
    '',
    '__proto__',
    'x',
  ),
);
const measurementValue = fc.oneof(
  fc.constantFrom(31, 32, 33, 47, 48, 49, 0, 64).map((n) => hex(n)),
  fc.record(
    {
      expected: fc.oneof(
        fc.constantFrom(32, 48, 20).map((n) => hex(n)),
        edgeJson,
      ),
      warnOnly: fc.oneof(fc.boolean(), edgeJson),
      warnonly: fc.boolean(),
    },
    { requiredKeys: [] },
  ),
  edgeJson,
);
const measurementMap = fc
  .dictionary(measurementKey, measurementValue, { maxKeys: 8 })
  .map((v) => new FuzzJson(v, `measurements(${JSON.stringify(v)})`));

function checkMeasurementResult(m: Measurements): void {
  ensure(m.size > 0, 'an empty policy was accepted');
  const lengths = new Set([...m.values()].map((x) => x.expected.length));
  ensure(lengths.size === 1, 'mixed measurement lengths');
  const [len] = [...lengths];
  ensure(len === PCR_MEASUREMENT_LENGTH || len === TDX_MEASUREMENT_LENGTH, `length ${len}`);
  for (const [i, x] of m) {
    ensure(Number.isSafeInteger(i) && i >= 0, `index ${i}`);
    ensure(len !== PCR_MEASUREMENT_LENGTH || i <= MAX_PCR_INDEX, `PCR index ${i}`);
    ensure(typeof x.warnOnly === 'boolean', 'warnOnly is a boolean');
  }
}

const invalidArgument = confbootError('invalid-argument');

function checkMeasurementInput(input: unknown): void {
  const m = callDefined(() => parseMeasurements(input), invalidArgument);
  if (m.ok) checkMeasurementResult(m.value);
  const c = callDefined(() => parseAttestationConfig(input), invalidArgument);
  if (c.ok) checkMeasurementResult(c.value.measurements);
}

/** Any JavaScript value, including Maps, typed arrays, boxed values and null-prototype objects. */
const anyValue = fc.anything({
  withBigInt: true,
  withBoxedValues: true,
  withMap: true,
  withSet: true,
  withNullPrototype: true,
  withTypedArray: true,
  withSparseArray: true,
  withObjectString: true,
  maxDepth: 3,
});

// ---- LUKS2 ----

const MiB = 1024 * 1024;

function luksBase(kdf: 'pbkdf2' | 'argon2id', slots: number, token: boolean): Record<string, unknown> {
  const slot = (offset: number) => ({
    type: 'luks2',
    key_size: 64,
    af: { type: 'luks1', stripes: 4000, hash: 'sha256' },
    area: {
      type: 'raw',
      offset: String(offset),
      size: '258048',
      encryption: 'aes-xts-plain64',
      key_size: 64,
    },
    kdf:
      kdf === 'pbkdf2'
        ? { type: 'pbkdf2', hash: 'sha256', iterations: 1000, salt: 'c2FsdA==' }
        : { type: 'argon2id', time: 4, memory: 32768, cpus: 2, salt: 'c2FsdA==' },
  });
  const keyslots: Record<string, unknown> = { 0: slot(32768) };
  if (slots > 1) keyslots[1] = slot(32768 + 258048);
  return {
    keyslots,
    tokens: token ? { 0: { type: 'constellation-state-disk', keyslots: [], diskIsInitialized: false } } : {},
    segments: {
      0: {
        type: 'crypt',
        offset: '16777216',
        size: 'dynamic',
        iv_tweak: '0',
        encryption: 'aes-xts-plain64',
        sector_size: 4096,
      },
    },
    digests: {
      0: {
        type: 'pbkdf2',
        keyslots: slots > 1 ? ['0', '1'] : ['0'],
        segments: ['0'],
        hash: 'sha256',
        iterations: 1000,
        salt: 'c2FsdA==',
        digest: 'ZGlnZXN0',
      },
    },
    config: { json_size: '12288', keyslots_size: '16744448' },
  };
}

const LUKS_BASES = [
  { name: 'pbkdf2-1slot', value: luksBase('pbkdf2', 1, false) },
  { name: 'argon2id-2slots-token', value: luksBase('argon2id', 2, true) },
];

const deviceSize = fc.oneof(
  { weight: 6, arbitrary: fc.constant(32 * MiB) },
  fc.constantFrom(0, -1, 1, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, 2 ** 53 + 2, 16 * MiB, 1.5),
  fc.integer({ min: 1, max: 2 ** 40 }),
);

const luksError = { name: 'Luks2HeaderError', test: (err: unknown) => err instanceof Luks2HeaderError };

function checkLuks(meta: unknown, size: number): void {
  const r = callDefined(() => validateLuks2Metadata(meta, size, DEFAULT_LUKS2_HEADER_POLICY), luksError);
  if (!r.ok) return;
  ensure(r.value.keyslots.includes(0), 'keyslot 0 exists');
  for (let i = 0; i < r.value.areas.length; i++)
    for (let j = i + 1; j < r.value.areas.length; j++) {
      const a = r.value.areas[i]!;
      const b = r.value.areas[j]!;
      ensure(!(a.offset < b.offset + b.size && b.offset < a.offset + a.size), `${a.name} overlaps ${b.name}`);
    }
}

// ---- QEMU metadata ----

const INSTANCE = {
  Name: 'node-1',
  ProviderID: 'qemu:///hostname/node-1',
  Role: 'Worker',
  VPCIP: '10.42.0.2',
};
const INSTANCE_BASES = [
  { name: 'instance', value: INSTANCE },
  {
    name: 'instance-aliases',
    value: {
      ...INSTANCE,
      Role: 'ControlPlane',
      AliasIPRanges: ['10.0.0.0/24'],
      SecondaryIPRange: '10.1.0.0/16',
    },
  },
];

function checkInstance(v: unknown): void {
  const r = callDefined(() => parseWireInstance(v, 'fuzz'), confbootError('internal'));
  if (r.ok) {
    ensure(['Unknown', 'ControlPlane', 'Worker'].includes(r.value.role), 'role');
    ensure(typeof r.value.name === 'string' && typeof r.value.vpcIp === 'string', 'name and IP are strings');
  }
}

const leaseText = fc.oneof(
  fc.string({ maxLength: 300 }),
  fc
    .tuple(
      fc.array(
        fc.oneof(
          fc.constant('1893456000 52:54:00:00:00:10 10.42.0.2 node-1 *'),
          fc
            .array(fc.string({ maxLength: 12, unit: 'grapheme-ascii' }), { maxLength: 6 })
            .map((f) => f.join(' ')),
          fc.constantFrom('', '   ', '\t', '\r', '#', '1 2 3', '1\t2\t3\t4'),
        ),
        { maxLength: 8 },
      ),
      fc.constantFrom('\n', '\r\n'),
    )
    .map(([lines, sep]) => lines.join(sep)),
);

// ---- huge ----

const hugeConfig = fc.record({
  kind: fc.constantFrom('many-indices', 'long-hex', 'long-key', 'deep', 'luks-many-keyslots', 'leases'),
  n: fc.integer({ min: 1 * MiB, max: 8 * MiB }),
});

function hugeText(kind: string, n: number): string {
  switch (kind) {
    case 'many-indices': {
      const parts: string[] = [];
      const entry = `{"expected":"${hex(32)}","warnOnly":false}`;
      for (let i = 0; parts.length * (entry.length + 14) < n; i++) parts.push(`"${i}":${entry}`);
      return `{${parts.join(',')}}`;
    }
    case 'long-hex':
      return `{"0":{"expected":"${'ab'.repeat(n / 2)}","warnOnly":false}}`;
    case 'long-key':
      return `{"${'1'.repeat(n)}":"${hex(32)}"}`;
    case 'deep': {
      // V8's JSON.parse itself needs ~1 s per million levels; 256 Ki levels keep CI fast.
      const depth = Math.min(Math.floor(n / 2), 1 << 18);
      return `{"measurements":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    }
    case 'luks-many-keyslots': {
      const slots = Array.from({ length: Math.floor(n / 400) }, (_, i) => `"${i}":{"type":"luks2"}`);
      return `{"keyslots":{${slots.join(',')}},"tokens":{},"segments":{},"digests":{},"config":{}}`;
    }
    default:
      return '1893456000 52:54:00:00:00:10 10.42.0.2 node-1 *\n'.repeat(Math.floor(n / 48));
  }
}

/** The configuration-parser properties. */
export const properties = {
  measurementsAnyValue: property({
    arbitrary: () => anyValue,
    check: checkMeasurementInput,
    runs: fuzzRuns(400),
  }),
  measurementsText: property({
    arbitrary: () => fc.oneof(fc.string({ maxLength: 200 }), fc.json({ maxDepth: 3 })),
    check: (t: string) => checkMeasurementInput(t),
    runs: fuzzRuns(300),
  }),
  measurementsStructured: property({
    arbitrary: () =>
      fc.oneof(
        measurementMap,
        jsonMutated(MEASUREMENT_BASES, 3),
        measurementMap.map((m) => new FuzzJson({ measurements: m.value }, `config(${m.recipe})`)),
      ),
    check: (x: FuzzJson) => {
      checkMeasurementInput(x.value);
      checkMeasurementInput(JSON.stringify(x.value) ?? '');
    },
    runs: fuzzRuns(500),
  }),
  luks2Mutated: property({
    arbitrary: () => fc.tuple(jsonMutated(LUKS_BASES, 4), deviceSize),
    check: ([x, size]: [FuzzJson, number]) => checkLuks(x.value, size),
    runs: fuzzRuns(600),
  }),
  luks2AnyValue: property({
    arbitrary: () => fc.tuple(anyValue, deviceSize),
    check: ([v, size]: [unknown, number]) => checkLuks(v, size),
    runs: fuzzRuns(200),
  }),
  qemuInstance: property({
    arbitrary: () =>
      fc.oneof(
        anyValue,
        jsonMutated(INSTANCE_BASES, 3).map((x) => x.value),
      ),
    check: checkInstance,
    runs: fuzzRuns(400),
  }),
  leases: property({
    arbitrary: () => leaseText,
    check: (t: string) => {
      const r = callDefined(() => parseLeases(t), errorWithPrefix(Error, 'leases line'));
      if (r.ok)
        for (const l of r.value) ensure(!!l.ip && !!l.hostname && !!l.mac && !!l.expiry, 'four fields');
    },
    runs: fuzzRuns(300),
  }),
  huge: property({
    arbitrary: () => hugeConfig,
    check: ({ kind, n }: { kind: string; n: number }) => {
      const text = hugeText(kind, n);
      checkMeasurementInput(text);
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        value = text;
      }
      checkLuks(value, 32 * MiB);
      checkInstance(value);
      callDefined(() => parseLeases(text), errorWithPrefix(Error, 'leases line'));
    },
    runs: fuzzRuns(6, 'heavy'),
    shrink: false,
  }),
};
