/**
 * The aTLS frame codec and reader: round trips, arbitrary chunking, no over-read (the bytes after
 * the last frame stay for HTTP/2), and property-based garbage (always a defined error, never a
 * crash or a hang).
 */
import { PassThrough } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeBody,
  encodeAttestationFrame,
  encodeVerdictFrame,
  FRAME_ATTESTATION,
  FRAME_HEADER_BYTES,
  FRAME_VERDICT,
  FrameReader,
  MAX_REASON_BYTES,
} from '../../../../src/adapters/grpc/atls/protocol.js';
import { isAttestationError, isConfbootError } from '../../../../src/ports/errors.js';

/** Feeds `bytes` into a stream in the given chunk sizes, then ends it. */
function streamOf(bytes: Buffer, cuts: number[] = []): PassThrough {
  const s = new PassThrough();
  let at = 0;
  for (const c of cuts) {
    if (at >= bytes.length) break;
    s.write(bytes.subarray(at, at + c));
    at += c;
  }
  s.end(bytes.subarray(at));
  return s;
}

describe('frames', () => {
  it('attestation and verdict frames round trip with the documented header', () => {
    const a = encodeAttestationFrame('1.3.9900.5.1', new Uint8Array([1, 2, 3]));
    expect(a.subarray(0, 4).toString('ascii')).toBe('CBAT');
    expect(a[4]).toBe(1);
    expect(a[5]).toBe(FRAME_ATTESTATION);
    expect(a.readUInt32BE(6)).toBe(a.length - FRAME_HEADER_BYTES);
    expect(decodeBody(FRAME_ATTESTATION, a.subarray(FRAME_HEADER_BYTES))).toEqual({
      type: FRAME_ATTESTATION,
      oid: '1.3.9900.5.1',
      document: new Uint8Array([1, 2, 3]),
    });
    const v = encodeVerdictFrame(false, 'measurements', 'PCR4 differs');
    expect(decodeBody(FRAME_VERDICT, v.subarray(FRAME_HEADER_BYTES))).toEqual({
      type: FRAME_VERDICT,
      accepted: false,
      check: 'measurements',
      reason: 'PCR4 differs',
    });
    expect(
      decodeBody(
        FRAME_ATTESTATION,
        encodeAttestationFrame('', new Uint8Array(0)).subarray(FRAME_HEADER_BYTES),
      ),
    ).toEqual({
      type: FRAME_ATTESTATION,
      oid: '',
      document: new Uint8Array(0),
    });
  });

  it('reasons are cut at 1024 bytes by the sender', () => {
    const v = encodeVerdictFrame(false, 'x', 'r'.repeat(5000));
    const f = decodeBody(FRAME_VERDICT, v.subarray(FRAME_HEADER_BYTES));
    expect(f.type === FRAME_VERDICT && f.reason.length).toBe(MAX_REASON_BYTES);
  });

  it('the reader reassembles frames from any chunking and leaves the following bytes unread', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.uint8Array({ maxLength: 3000 }),
        fc.array(fc.integer({ min: 1, max: 700 }), { maxLength: 20 }),
        fc.uint8Array({ minLength: 1, maxLength: 64 }),
        async (doc, cuts, trailer) => {
          const bytes = Buffer.concat([
            encodeAttestationFrame('1.3.9900.1.1', doc),
            encodeVerdictFrame(true),
            Buffer.from(trailer),
          ]);
          const s = streamOf(bytes, cuts);
          const r = new FrameReader(s);
          const a = await r.next();
          expect(a.type === FRAME_ATTESTATION && Buffer.from(a.document).equals(Buffer.from(doc))).toBe(true);
          expect(await r.next()).toMatchObject({ type: FRAME_VERDICT, accepted: true });
          const rest: Buffer[] = [];
          for await (const chunk of s) rest.push(chunk as Buffer);
          expect(Buffer.concat(rest).equals(Buffer.from(trailer))).toBe(true);
        },
      ),
      { numRuns: 60 },
    );
  });

  it('arbitrary bytes give a frame or a defined error, never a crash or a hang', async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 400 }), fc.boolean(), async (junk, withMagic) => {
        const bytes = withMagic
          ? Buffer.concat([Buffer.from('CBAT'), Buffer.of(1), Buffer.from(junk)])
          : Buffer.from(junk);
        const r = new FrameReader(streamOf(bytes), 256);
        const out = await r.next().catch((e: unknown) => e);
        if (out instanceof Error) {
          expect(isAttestationError(out) || (isConfbootError(out) && out.code === 'unavailable')).toBe(true);
          if (isAttestationError(out)) expect(['frame-format', 'frame-size']).toContain(out.check);
        } else expect([FRAME_ATTESTATION, FRAME_VERDICT]).toContain((out as { type: number }).type);
      }),
      { numRuns: 300 },
    );
  });

  it('a body longer than the limit is refused from the header', async () => {
    const header = encodeAttestationFrame('1.3.9900.1.1', new Uint8Array(0)).subarray(0, FRAME_HEADER_BYTES);
    header.writeUInt32BE(10 * 1024 * 1024, 6);
    const s = new PassThrough();
    s.write(header); // never ended: the reader must decide from the header alone
    const e = await new FrameReader(s).next().catch((x: unknown) => x);
    expect(isAttestationError(e) && e.check).toBe('frame-size');
    expect((e as Error).message).toBe('frame of 10485760 bytes exceeds the limit of 1048641 bytes');
  });

  it('closing between frames is "unavailable", closing inside one is a truncated frame', async () => {
    const e1 = await new FrameReader(streamOf(Buffer.alloc(0))).next().catch((x: unknown) => x);
    expect(isConfbootError(e1) && e1.code).toBe('unavailable');
    const frame = encodeAttestationFrame('1.3.9900.1.1', new Uint8Array(100));
    const e2 = await new FrameReader(streamOf(frame.subarray(0, 50))).next().catch((x: unknown) => x);
    expect(isAttestationError(e2) && e2.check).toBe('frame-format');
    expect((e2 as Error).message).toContain('connection closed inside the frame body');
  });
});
