/**
 * Fuzz properties of the TCG event-log parser (src/adapters/attestation/eventlog/tcg-log.ts): random
 * bytes, mutations of the 14 real go-tpm-tools logs, synthetic logs built field by field (crypto-agile
 * and legacy, with StartupLocality, SCRTM version, non-host info and separator events), and 1–10 MB
 * inputs. Each parsed log is also replayed and run through the PCR check and the GCE platform state,
 * as the vTPM validator does. Everything must end in a result or an AttestationError.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import {
  checkEventLogAgainstPcrs,
  EventType,
  parseEventLog,
  platformState,
  replayEventLog,
} from '../../../src/adapters/attestation/eventlog/tcg-log.js';
import { fuzzRuns } from '../harness/config.js';
import { buildHuge, FuzzBytes, hugeBytes, hugeExamples, mutated, randomBytes } from '../harness/mutate.js';
import { attestationError, callDefined, ensure, property } from '../harness/property.js';
import { realEventLogs } from '../harness/vectors.js';

const BANK_SIZES: Record<number, number> = { 4: 20, 11: 32, 12: 48, 13: 64 };

/** Parses `bytes` and, if that succeeds, replays and evaluates the log like the validator does. */
export function exerciseEventLog(bytes: Uint8Array): void {
  const parsed = callDefined(() => parseEventLog(bytes), attestationError('event-log-format'));
  if (!parsed.ok) return;
  const log = parsed.value;
  ensure(log.banks.length > 0, 'a parsed log has at least one bank');
  for (const e of log.events) {
    ensure(Number.isInteger(e.pcr) && e.pcr >= 0 && e.pcr <= 31, `event ${e.seq} PCR ${e.pcr}`);
    for (const [alg, d] of e.digests) {
      ensure(log.banks.includes(alg), `event ${e.seq} has a digest for undeclared bank ${alg}`);
      const want = BANK_SIZES[alg];
      ensure(
        want === undefined || d.length === want,
        `event ${e.seq} digest of ${d.length} bytes for ${alg}`,
      );
    }
  }
  const replay = callDefined(() => replayEventLog(log), attestationError('event-log-format'));
  if (replay.ok) {
    for (const [alg, pcrs] of replay.value)
      for (const [pcr, v] of pcrs) ensure(v.length === BANK_SIZES[alg], `replayed PCR${pcr} of bank ${alg}`);
  }
  for (const alg of [4, 11, 12, 13, 0x10]) {
    callDefined(
      () => checkEventLogAgainstPcrs(log, alg, new Map([[0, new Uint8Array(32)]])),
      attestationError('event-log', 'event-log-format'),
    );
    callDefined(() => platformState(log, alg), attestationError('event-log'));
  }
}

// ---- synthetic logs ----

const u16 = (v: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(v & 0xffff);
  return b;
};
const u32 = (v: number) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v >>> 0);
  return b;
};

const GCE_VERSION = Buffer.concat([Buffer.from('GCE Virtual Firmware v20\0', 'utf16le')]);
const GCE_NONHOST = Buffer.from('GCE NonHostInfo\0', 'latin1');
const STARTUP_LOCALITY = Buffer.from('StartupLocality\0', 'latin1');

const eventType = fc.oneof(
  fc.constantFrom(...Object.values(EventType)),
  fc.constantFrom(0x80000001, 0x80000002, 0x80000003, 0x8000000b, 0x0d),
  fc.nat({ max: 0xffffffff }),
);
const pcrIndex = fc.oneof({ weight: 6, arbitrary: fc.nat({ max: 23 }) }, fc.constantFrom(31, 32, 0xffffffff));
const eventData = fc.oneof(
  fc.uint8Array({ maxLength: 64 }),
  fc.constant(new Uint8Array(GCE_VERSION)),
  fc.uint8Array({ maxLength: 3 }).map((t) => new Uint8Array(Buffer.concat([GCE_NONHOST, t]))),
  fc.uint8Array({ maxLength: 3 }).map((t) => new Uint8Array(Buffer.concat([STARTUP_LOCALITY, t]))),
  fc.constantFrom(new Uint8Array(4), new Uint8Array([0xff, 0xff, 0xff, 0xff])),
);
/** How an event's digest is made: honest hash of its data, a random value, or a separator's hash. */
const digestKind = fc.constantFrom('hash', 'random', 'separator', 'wrong-size' as const);

interface SynthEvent {
  pcr: number;
  type: number;
  data: Uint8Array;
  digest: 'hash' | 'random' | 'separator' | 'wrong-size';
  /** Agile only: declared digest count minus real count (0 = honest). */
  countSkew: number;
  /** Declared event size minus real size (0 = honest). */
  sizeSkew: number;
}

const synthEvent: fc.Arbitrary<SynthEvent> = fc.record({
  pcr: pcrIndex,
  type: eventType,
  data: eventData,
  digest: digestKind,
  countSkew: fc.oneof({ weight: 8, arbitrary: fc.constant(0) }, fc.integer({ min: -1, max: 2 })),
  sizeSkew: fc.oneof({ weight: 8, arbitrary: fc.constant(0) }, fc.integer({ min: -4, max: 4 })),
});

function digestFor(e: SynthEvent, alg: number, size: number): Buffer {
  const name = { 4: 'sha1', 11: 'sha256', 12: 'sha384', 13: 'sha512' }[alg];
  if (e.digest === 'wrong-size') return Buffer.alloc(size + 1, 0xab);
  if (e.digest === 'random' || !name) return Buffer.alloc(size, 0x5a);
  const data = e.digest === 'separator' ? Buffer.alloc(4) : e.data;
  return createHash(name).update(data).digest().subarray(0, size);
}

function encodeEvent(e: SynthEvent, algs: Array<[number, number]> | undefined): Buffer {
  const size = Math.max(0, e.data.length + e.sizeSkew);
  if (!algs) return Buffer.concat([u32(e.pcr), u32(e.type), digestFor(e, 4, 20), u32(size), e.data]);
  const digests = algs.map(([alg, sz]) => Buffer.concat([u16(alg), digestFor(e, alg, sz)]));
  return Buffer.concat([
    u32(e.pcr),
    u32(e.type),
    u32(Math.max(0, algs.length + e.countSkew)),
    ...digests,
    u32(size),
    e.data,
  ]);
}

const algList = fc.uniqueArray(
  fc.oneof(
    { weight: 6, arbitrary: fc.constantFrom<[number, number]>([4, 20], [11, 32], [12, 48], [13, 64]) },
    fc.tuple(fc.nat({ max: 0xffff }), fc.constantFrom(0, 1, 20, 32, 128, 129, 0xffff)),
  ),
  { minLength: 0, maxLength: 5, selector: ([alg]) => alg },
);

/** A synthetic crypto-agile or legacy log. */
const synthLog = fc
  .record({
    agile: fc.boolean(),
    algs: algList,
    numAlgsSkew: fc.oneof({ weight: 6, arbitrary: fc.constant(0) }, fc.constantFrom(-1, 1, 17, 0xffffffff)),
    vendor: fc.uint8Array({ maxLength: 8 }),
    events: fc.array(synthEvent, { maxLength: 12 }),
    padding: fc.nat({ max: 64 }),
  })
  .map(({ agile, algs, numAlgsSkew, vendor, events, padding }) => {
    let head: Buffer;
    if (agile) {
      const n = numAlgsSkew === 0xffffffff ? numAlgsSkew : Math.max(0, algs.length + numAlgsSkew);
      const spec = Buffer.concat([
        Buffer.from('Spec ID Event03\0', 'latin1'),
        u32(0),
        Buffer.from([0, 2, 0, 2]),
        u32(n),
        ...algs.map(([a, s]) => Buffer.concat([u16(a), u16(s)])),
        Buffer.from([vendor.length]),
        vendor,
      ]);
      head = Buffer.concat([u32(0), u32(EventType.EV_NO_ACTION), Buffer.alloc(20), u32(spec.length), spec]);
    } else {
      head = Buffer.alloc(0);
    }
    const body = events.map((e) => encodeEvent(e, agile ? algs : undefined));
    const bytes = new Uint8Array(Buffer.concat([head, ...body, Buffer.alloc(padding)]));
    return new FuzzBytes(
      bytes,
      `synthLog(${JSON.stringify({ agile, algs, numAlgsSkew, events: events.length, padding })})`,
    );
  });

/**
 * One input of every huge shape at 1 MiB, and zeros ending in one byte at the largest size: that
 * shape once took quadratic time (onlyZerosLeft rescanned the zero run before every event; 1 MiB
 * ≈ 20 s, 10 MiB a hang; fixed in 6de24a0), which the stall watchdog would report again.
 */
function hugeEventLogExamples(): FuzzBytes[] {
  const prefix = realEventLogs()[2];
  return [
    ...hugeExamples(1 << 20, prefix),
    buildHuge({ len: 10 << 20, shape: 'zeros-then-byte', seed: 1, lead: new Uint8Array() }),
  ];
}

/** The event-log properties. */
export const properties = {
  random: property({
    arbitrary: () => randomBytes(4096),
    check: (b: FuzzBytes) => exerciseEventLog(b.bytes),
    runs: fuzzRuns(300),
  }),
  mutatedRealLogs: property({
    arbitrary: () => mutated(realEventLogs(), 4),
    check: (b: FuzzBytes) => exerciseEventLog(b.bytes),
    runs: fuzzRuns(300),
  }),
  synthetic: property({
    arbitrary: () => synthLog,
    check: (b: FuzzBytes) => exerciseEventLog(b.bytes),
    runs: fuzzRuns(400),
  }),
  huge: property({
    arbitrary: () => hugeBytes(1 << 20, 10 << 20, realEventLogs()[2]),
    examples: hugeEventLogExamples,
    check: (b: FuzzBytes) => exerciseEventLog(b.bytes),
    runs: fuzzRuns(8, 'heavy'),
    shrink: false,
  }),
};
