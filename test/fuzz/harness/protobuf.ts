/**
 * Structure-aware protobuf request generation for the RPC fuzz properties: from a message's field
 * list, build wire bytes with every field present, absent, repeated or given edge values (empty,
 * huge, invalid UTF-8, lone surrogates, 10-byte varints), plus unknown fields, wrong wire types and
 * truncation. Hand-encoded, so requests no generated encoder would produce still reach the server.
 */
import fc from 'fast-check';

/** Field types the confboot protos use. */
export type FieldType = 'string' | 'bytes' | 'uint32' | 'bool' | 'message';

/** One field of a message. `fields` describes a nested message. */
export interface FieldSpec {
  no: number;
  name: string;
  type: FieldType;
  repeated?: boolean;
  fields?: FieldSpec[];
}

function varint(v: bigint): number[] {
  const out: number[] = [];
  let x = BigInt.asUintN(64, v);
  while (x > 0x7fn) {
    out.push(Number(x & 0x7fn) | 0x80);
    x >>= 7n;
  }
  out.push(Number(x));
  return out;
}

function tag(no: number, wire: number): number[] {
  return varint((BigInt(no) << 3n) | BigInt(wire));
}

function lengthDelimited(no: number, body: Uint8Array): Uint8Array {
  return Uint8Array.from([...tag(no, 2), ...varint(BigInt(body.length)), ...body]);
}

/** Edge strings: empty, long, non-ASCII, lone surrogates, NUL, path tricks, very long (`big`). */
function stringValue(big: boolean): fc.Arbitrary<Uint8Array> {
  const enc = (s: string) => new TextEncoder().encode(s);
  const arbs: Array<fc.Arbitrary<Uint8Array>> = [
    fc.string({ maxLength: 40 }).map(enc),
    fc.string({ maxLength: 20, unit: 'grapheme' }).map(enc),
    fc.constantFrom('', '\u0000', '../../etc/passwd', 'ca.key', 'a'.repeat(1025), '\ud800', '💥').map(enc),
    // Invalid UTF-8 on the wire (a string field must hold UTF-8).
    fc.constantFrom(Uint8Array.of(0xff), Uint8Array.of(0xc3), Uint8Array.of(0xed, 0xa0, 0x80)),
  ];
  if (big) arbs.push(fc.integer({ min: 64 * 1024, max: 1 << 20 }).map((n) => new Uint8Array(n).fill(0x41)));
  return fc.oneof(...arbs);
}

function bytesValue(big: boolean): fc.Arbitrary<Uint8Array> {
  const arbs: Array<fc.Arbitrary<Uint8Array>> = [
    fc.uint8Array({ maxLength: 64 }),
    fc.constantFrom(new Uint8Array(0), new Uint8Array(32), new Uint8Array(33).fill(0xff)),
  ];
  if (big) arbs.push(fc.integer({ min: 64 * 1024, max: 1 << 20 }).map((n) => new Uint8Array(n).fill(0x5a)));
  return fc.oneof(...arbs);
}

const varintValue: fc.Arbitrary<bigint> = fc.oneof(
  fc.constantFrom(0n, 1n, 2n, 32n, 127n, 128n, 0x7fffffffn, 0x80000000n, 0xffffffffn, 0x100000000n, -1n),
  fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
);

function fieldBytes(spec: FieldSpec, big: boolean, depth: number): fc.Arbitrary<Uint8Array> {
  switch (spec.type) {
    case 'string':
      return stringValue(big).map((v) => lengthDelimited(spec.no, v));
    case 'bytes':
      return bytesValue(big).map((v) => lengthDelimited(spec.no, v));
    case 'uint32':
    case 'bool':
      return varintValue.map((v) => Uint8Array.from([...tag(spec.no, 0), ...varint(v)]));
    case 'message':
      return depth > 2
        ? fc.constant(lengthDelimited(spec.no, new Uint8Array()))
        : messageBytes(spec.fields ?? [], big, depth + 1).map((v) => lengthDelimited(spec.no, v));
  }
}

/** Garbage that is not any declared field: unknown numbers, wrong wire types, bad varints. */
const junkField: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc
    .tuple(fc.integer({ min: 12, max: 536870911 }), fc.uint8Array({ maxLength: 8 }))
    .map(([no, b]) => lengthDelimited(no, b)),
  fc
    .tuple(fc.integer({ min: 1, max: 12 }), fc.constantFrom(1, 5, 3, 4, 6, 7))
    .map(([no, wire]) => Uint8Array.from([...tag(no, wire), 0, 0, 0, 0, 0, 0, 0, 0])),
  fc.constant(Uint8Array.of(0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f)), // length far beyond the message
  fc.constant(Uint8Array.of(0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01)), // 11-byte varint
  fc.constant(Uint8Array.of(0x00)), // field number 0
  fc.uint8Array({ minLength: 1, maxLength: 16 }),
);

/** Bytes of a message with the given fields: each absent, present or repeated, in any order, plus junk. */
export function messageBytes(fields: FieldSpec[], big = false, depth = 0): fc.Arbitrary<Uint8Array> {
  const perField = fields.map((f) => fc.array(fieldBytes(f, big, depth), { maxLength: f.repeated ? 4 : 2 }));
  return fc
    .tuple(
      fc.tuple(...perField),
      fc.array(junkField, { maxLength: depth === 0 ? 2 : 0 }),
      fc.boolean(),
      fc.nat(),
    )
    .map(([parts, junk, shuffle, cut]) => {
      let chunks = [...parts.flat(), ...junk];
      if (shuffle) chunks = chunks.reverse();
      const all = Buffer.concat(chunks);
      // Rarely cut the message short (a truncated last field).
      return cut % 11 === 0 && all.length > 0 ? all.subarray(0, cut % all.length) : new Uint8Array(all);
    });
}

/** A request for the fuzz properties: raw bytes with a printable recipe (sizes only for big ones). */
export class WireRequest {
  constructor(readonly bytes: Uint8Array) {}

  /** Used by fast-check when it prints a counterexample. */
  [fc.toStringMethod](): string {
    const b = Buffer.from(this.bytes);
    return b.length <= 512
      ? `wire(${b.toString('hex') || '""'})`
      : `wire(${b.length} bytes, head ${b.subarray(0, 64).toString('hex')}…)`;
  }
}

/** Requests for `fields`: structured (optionally with big values) or fully random bytes. */
export function wireRequest(fields: FieldSpec[], big = false): fc.Arbitrary<WireRequest> {
  return fc
    .oneof(
      { weight: 5, arbitrary: messageBytes(fields, big) },
      { weight: 1, arbitrary: fc.uint8Array({ maxLength: 256 }) },
    )
    .map((b) => new WireRequest(b));
}

/** components.Component. */
export const COMPONENT_FIELDS: FieldSpec[] = [
  { no: 1, name: 'url', type: 'string' },
  { no: 2, name: 'hash', type: 'string' },
  { no: 3, name: 'install_path', type: 'string' },
  { no: 4, name: 'extract', type: 'bool' },
];

/** kms.GetDataKeyRequest. */
export const GET_DATA_KEY_FIELDS: FieldSpec[] = [
  { no: 1, name: 'data_key_id', type: 'string' },
  { no: 2, name: 'length', type: 'uint32' },
];

/** join.IssueJoinTicketRequest. */
export const ISSUE_JOIN_TICKET_FIELDS: FieldSpec[] = [
  { no: 1, name: 'disk_uuid', type: 'string' },
  { no: 2, name: 'certificate_request', type: 'bytes' },
  { no: 3, name: 'is_control_plane', type: 'bool' },
  { no: 4, name: 'host_public_key', type: 'bytes' },
  { no: 5, name: 'host_certificate_principals', type: 'string', repeated: true },
];

/** join.IssueRejoinTicketRequest. */
export const ISSUE_REJOIN_TICKET_FIELDS: FieldSpec[] = [{ no: 1, name: 'disk_uuid', type: 'string' }];

/** init.InitRequest. */
export const INIT_REQUEST_FIELDS: FieldSpec[] = [
  { no: 1, name: 'kms_uri', type: 'string' },
  { no: 2, name: 'storage_uri', type: 'string' },
  { no: 3, name: 'measurement_salt', type: 'bytes' },
  { no: 5, name: 'kubernetes_version', type: 'string' },
  { no: 6, name: 'conformance_mode', type: 'bool' },
  { no: 7, name: 'kubernetes_components', type: 'message', repeated: true, fields: COMPONENT_FIELDS },
  { no: 8, name: 'init_secret', type: 'bytes' },
  { no: 9, name: 'cluster_name', type: 'string' },
  { no: 10, name: 'apiserver_cert_sans', type: 'string', repeated: true },
  { no: 11, name: 'service_cidr', type: 'string' },
];
