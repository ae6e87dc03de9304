/**
 * Fuzz properties of the attested-TLS frame decoder (src/adapters/grpc/atls/protocol.ts): byte
 * streams of valid, mutated and random frames, delivered in random chunks and then ended or
 * destroyed, read with FrameReader under various document limits; and decodeBody on any body. Every
 * read must settle with a frame or an AttestationError (frame-format, frame-size) or, once the
 * stream is gone, ConfbootError(unavailable) — never hang waiting on a closed stream. Encoded frames
 * must decode to what was encoded.
 */
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import {
  decodeBody,
  encodeAttestationFrame,
  encodeVerdictFrame,
  FRAME_ATTESTATION,
  FRAME_VERDICT,
  FrameReader,
  MAX_REASON_BYTES,
} from '../../../src/adapters/grpc/atls/protocol.js';
import { fuzzRuns } from '../harness/config.js';
import { applyMutation, type Mutation, mutation } from '../harness/mutate.js';
import {
  anyOf,
  attestationError,
  callDefined,
  callDefinedAsync,
  confbootError,
  ensure,
  property,
} from '../harness/property.js';

const frameError = attestationError('frame-format', 'frame-size');
const readError = anyOf(frameError, confbootError('unavailable'));

const oid = fc.oneof(
  fc.constantFrom('1.3.9900.1.1', '1.3.9900.4.1', '1.3.9900.5.99', '2.0', '0.0', '1.3.6.1.4.1.11129.2.1.21'),
  fc.array(fc.nat(99999), { minLength: 1, maxLength: 6 }).map((a) => `1.${a.join('.')}`),
);

/** One frame as bytes: valid attestation or verdict, or the empty "no attestation" frame. */
const validFrame = fc.oneof(
  fc.tuple(oid, fc.uint8Array({ maxLength: 300 })).map(([o, d]) => encodeAttestationFrame(o, d)),
  fc.constant(encodeAttestationFrame('', new Uint8Array())),
  fc
    .tuple(fc.boolean(), fc.string({ maxLength: 40 }), fc.string({ maxLength: 200 }))
    .map(([a, c, r]) => encodeVerdictFrame(a, c, r)),
);

interface StreamCase {
  frames: Uint8Array[];
  steps: Mutation[];
  chunks: number[];
  close: 'end' | 'destroy' | 'destroy-error';
  limit: number | undefined;
}

const streamCase: fc.Arbitrary<StreamCase> = fc.record({
  frames: fc.array(fc.oneof({ weight: 4, arbitrary: validFrame }, fc.uint8Array({ maxLength: 40 })), {
    minLength: 0,
    maxLength: 4,
  }),
  steps: fc.array(mutation, { maxLength: 3 }),
  chunks: fc.array(fc.integer({ min: 1, max: 64 }), { maxLength: 8 }),
  close: fc.constantFrom('end', 'end', 'destroy', 'destroy-error' as const),
  limit: fc.option(fc.constantFrom(0, 1, 16, 300, 1 << 20), { nil: undefined }),
});

/** Feeds `bytes` in chunks on later ticks, then closes the stream as told. */
function feed(stream: PassThrough, bytes: Uint8Array, chunks: number[], close: StreamCase['close']): void {
  let off = 0;
  let i = 0;
  const step = () => {
    if (off < bytes.length) {
      const n = chunks.length ? (chunks[i++ % chunks.length] as number) : bytes.length;
      stream.write(Buffer.from(bytes.subarray(off, off + n)));
      off += n;
      setImmediate(step);
      return;
    }
    if (close === 'end') stream.end();
    else if (close === 'destroy') stream.destroy();
    else stream.destroy(new Error('connection reset (fuzz)'));
  };
  setImmediate(step);
}

async function checkStream(c: StreamCase): Promise<void> {
  const bytes = c.steps.reduce(applyMutation, new Uint8Array(Buffer.concat(c.frames)));
  const stream = new PassThrough();
  stream.on('error', () => {});
  const reader = new FrameReader(stream, c.limit);
  feed(stream, bytes, c.chunks, c.close);
  // At most one frame per 10 bytes can be read; one more read must then fail.
  for (let i = 0; i <= bytes.length / 10 + 1; i++) {
    const r = await callDefinedAsync(() => reader.next(), readError);
    if (!r.ok) return;
    const f = r.value;
    ensure(f.type === FRAME_ATTESTATION || f.type === FRAME_VERDICT, `frame type ${f.type}`);
  }
  throw new Error('FrameReader returned more frames than the bytes can hold');
}

/** An encode → decode round trip through a stream. */
async function roundTrip(input: {
  oid: string;
  doc: Uint8Array;
  check: string;
  reason: string;
  accepted: boolean;
}) {
  const stream = new PassThrough();
  const reader = new FrameReader(stream);
  stream.end(
    Buffer.concat([
      encodeAttestationFrame(input.oid, input.doc),
      encodeVerdictFrame(input.accepted, input.check, input.reason),
    ]),
  );
  const a = await reader.next();
  ensure(a.type === FRAME_ATTESTATION, 'first frame is the attestation');
  if (a.type === FRAME_ATTESTATION) {
    ensure(a.oid === input.oid, 'same OID');
    ensure(Buffer.from(a.document).equals(Buffer.from(input.doc)), 'same document');
  }
  const v = await reader.next();
  ensure(v.type === FRAME_VERDICT, 'second frame is the verdict');
  if (v.type === FRAME_VERDICT) {
    ensure(v.accepted === input.accepted, 'same verdict');
    ensure(v.check === input.check.replace(/[^\x20-\x7e]/g, '?').slice(0, 255), 'same (sanitized) check');
    if (Buffer.byteLength(input.reason) <= MAX_REASON_BYTES) ensure(v.reason === input.reason, 'same reason');
  }
  const end = await callDefinedAsync(() => reader.next(), readError);
  ensure(!end.ok, 'no third frame');
}

/** The aTLS frame properties. */
export const properties = {
  stream: property({
    arbitrary: () => streamCase,
    check: checkStream,
    runs: fuzzRuns(400),
    async: true,
  }),
  decodeBody: property({
    arbitrary: () =>
      fc.tuple(fc.oneof(fc.constantFrom(1, 2), fc.nat(255)), fc.uint8Array({ maxLength: 200 })),
    check: ([type, body]: [number, Uint8Array]) => {
      callDefined(() => decodeBody(type, Buffer.from(body)), frameError);
    },
    runs: fuzzRuns(500),
  }),
  roundTrip: property({
    arbitrary: () =>
      fc.record({
        oid,
        doc: fc.uint8Array({ minLength: 1, maxLength: 2000 }),
        check: fc.string({ maxLength: 300 }),
        reason: fc.string({ maxLength: 1200, unit: 'grapheme' }),
        accepted: fc.boolean(),
      }),
    check: roundTrip,
    runs: fuzzRuns(200),
    async: true,
  }),
  huge: property({
    arbitrary: () =>
      fc.record({
        kind: fc.constantFrom('document-at-limit', 'document-over-limit', 'declared-huge', 'garbage'),
        n: fc.integer({ min: 1 << 20, max: 10 << 20 }),
      }),
    check: async ({ kind, n }: { kind: string; n: number }) => {
      let bytes: Buffer;
      if (kind === 'document-at-limit')
        bytes = encodeAttestationFrame('1.3.9900.1.1', new Uint8Array(1 << 20));
      else if (kind === 'document-over-limit')
        bytes = encodeAttestationFrame('1.3.9900.1.1', new Uint8Array(n + 1));
      else if (kind === 'declared-huge') {
        bytes = encodeAttestationFrame('1.3.9900.1.1', new Uint8Array(8));
        bytes.writeUInt32BE(0xffffffff, 6);
      } else bytes = Buffer.alloc(n, 0x43);
      await checkStream({ frames: [bytes], steps: [], chunks: [65536], close: 'end', limit: undefined });
    },
    runs: fuzzRuns(6, 'heavy'),
    async: true,
    shrink: false,
  }),
};
