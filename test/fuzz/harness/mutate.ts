/**
 * Input generators shared by the fuzz properties: structure-aware mutations of valid inputs (bit
 * flips, truncation, cut, insert, append, duplicated regions, integer fields overwritten with edge
 * values in either byte order), fully random bytes, and megabyte-sized inputs built from a small
 * recipe. Every generated value prints as its recipe (base name + mutation list), so a shrunk
 * counterexample reads like "mutate(cos-85-amd-sev.bin, [truncate@1200])" and can be replayed.
 */
import { createHash } from 'node:crypto';
import fc from 'fast-check';

/** Bytes plus a short, replayable description of how they were made. */
export class FuzzBytes {
  constructor(
    readonly bytes: Uint8Array,
    readonly recipe: string,
  ) {}

  /** Used by fast-check when it prints a counterexample. */
  [fc.toStringMethod](): string {
    return `${this.recipe} /* ${describeBytes(this.bytes)} */`;
  }
}

/** Short description of bytes: the full hex up to 96 bytes, else length, head and SHA-256. */
export function describeBytes(b: Uint8Array): string {
  const hex = Buffer.from(b).toString('hex');
  if (b.length <= 96) return `${b.length} bytes: ${hex}`;
  const sha = createHash('sha256').update(b).digest('hex').slice(0, 16);
  return `${b.length} bytes, head ${hex.slice(0, 64)}…, sha256 ${sha}…`;
}

/** One mutation step. Positions are taken modulo the current length, so steps compose. */
export type Mutation =
  | { op: 'flip'; pos: number; mask: number }
  | { op: 'truncate'; pos: number }
  | { op: 'cut'; pos: number; n: number }
  | { op: 'insert'; pos: number; data: Uint8Array }
  | { op: 'append'; data: Uint8Array }
  | { op: 'dup'; pos: number; n: number }
  | { op: 'int'; pos: number; width: 1 | 2 | 4 | 8; le: boolean; value: EdgeValue };

/** An edge value for an integer field: a constant, or one relative to the input length. */
export type EdgeValue = number | 'len' | 'len-1' | 'len+1';

const EDGE_CONSTANTS = [
  0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xfffe, 0xffff, 0x10000, 0xffffff, 0x7fffffff, 0x80000000,
  0xfffffffe, 0xffffffff,
];

/** Edge values for integer fields: boundaries of every width, the input length ± 1, and anything. */
export const edgeValue: fc.Arbitrary<EdgeValue> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...EDGE_CONSTANTS) },
  { weight: 2, arbitrary: fc.constantFrom<EdgeValue>('len', 'len-1', 'len+1') },
  { weight: 1, arbitrary: fc.nat({ max: 0xffffffff }) },
);

const smallData = fc.uint8Array({ minLength: 1, maxLength: 64 });

/** One mutation. */
export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('flip' as const),
      pos: fc.nat(),
      mask: fc.integer({ min: 1, max: 255 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('truncate' as const), pos: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('cut' as const),
      pos: fc.nat(),
      n: fc.integer({ min: 1, max: 64 }),
    }),
  },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('insert' as const), pos: fc.nat(), data: smallData }) },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('append' as const),
      data: fc.uint8Array({ minLength: 1, maxLength: 256 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      op: fc.constant('dup' as const),
      pos: fc.nat(),
      n: fc.integer({ min: 1, max: 512 }),
    }),
  },
  {
    weight: 5,
    arbitrary: fc.record({
      op: fc.constant('int' as const),
      pos: fc.nat(),
      width: fc.constantFrom<1 | 2 | 4 | 8>(1, 2, 4, 8),
      le: fc.boolean(),
      value: edgeValue,
    }),
  },
);

function resolveEdge(v: EdgeValue, len: number): number {
  if (v === 'len') return len;
  if (v === 'len-1') return Math.max(0, len - 1);
  if (v === 'len+1') return len + 1;
  return v;
}

/** Applies one mutation to a copy of `b`. */
export function applyMutation(b: Uint8Array, m: Mutation): Uint8Array {
  const len = b.length;
  const at = (pos: number) => (len === 0 ? 0 : pos % len);
  switch (m.op) {
    case 'flip': {
      if (len === 0) return b;
      const out = Uint8Array.from(b);
      const i = at(m.pos);
      out[i] = (out[i] as number) ^ m.mask;
      return out;
    }
    case 'truncate':
      return b.slice(0, m.pos % (len + 1));
    case 'cut': {
      const i = at(m.pos);
      return Buffer.concat([b.subarray(0, i), b.subarray(i + m.n)]);
    }
    case 'insert': {
      const i = m.pos % (len + 1);
      return Buffer.concat([b.subarray(0, i), m.data, b.subarray(i)]);
    }
    case 'append':
      return Buffer.concat([b, m.data]);
    case 'dup': {
      const i = at(m.pos);
      const region = b.subarray(i, i + m.n);
      return Buffer.concat([b.subarray(0, i + region.length), region, b.subarray(i + region.length)]);
    }
    case 'int': {
      if (len < m.width) return b;
      const out = Buffer.from(b);
      const i = m.pos % (len - m.width + 1);
      const v = BigInt(resolveEdge(m.value, len)) & ((1n << BigInt(8 * m.width)) - 1n);
      for (let k = 0; k < m.width; k++) {
        const byte = Number((v >> BigInt(8 * k)) & 0xffn);
        out[m.le ? i + k : i + m.width - 1 - k] = byte;
      }
      return new Uint8Array(out);
    }
  }
}

function showMutation(m: Mutation): string {
  switch (m.op) {
    case 'flip':
      return `flip@${m.pos}^0x${m.mask.toString(16)}`;
    case 'truncate':
      return `truncate@${m.pos}`;
    case 'cut':
      return `cut@${m.pos}+${m.n}`;
    case 'insert':
      return `insert@${m.pos}:${Buffer.from(m.data).toString('hex')}`;
    case 'append':
      return `append:${Buffer.from(m.data).toString('hex')}`;
    case 'dup':
      return `dup@${m.pos}+${m.n}`;
    case 'int':
      return `u${m.width * 8}${m.le ? 'le' : 'be'}@${m.pos}=${String(m.value)}`;
  }
}

/** A named valid input to mutate. */
export interface Base {
  name: string;
  bytes: Uint8Array;
}

/** Mutations (1 to `maxSteps` steps) of one of `bases`. Positions are modulo the current length. */
export function mutated(bases: Base[], maxSteps = 4): fc.Arbitrary<FuzzBytes> {
  if (bases.length === 0) throw new Error('mutated: no base inputs');
  return fc
    .tuple(fc.nat({ max: bases.length - 1 }), fc.array(mutation, { minLength: 1, maxLength: maxSteps }))
    .map(([i, steps]) => {
      const base = bases[i] as Base;
      const bytes = steps.reduce(applyMutation, base.bytes);
      return new FuzzBytes(bytes, `mutate(${base.name}, [${steps.map(showMutation).join(', ')}])`);
    });
}

/** Fully random bytes, up to `maxLength`. */
export function randomBytes(maxLength = 2048): fc.Arbitrary<FuzzBytes> {
  return fc
    .uint8Array({ maxLength })
    .map((b) => new FuzzBytes(b, `bytes(${Buffer.from(b).toString('hex') || '""'})`));
}

/** xorshift32 stream: fast, deterministic filler for megabyte inputs. */
export function fillRandom(out: Uint8Array, seed: number): Uint8Array {
  let x = seed >>> 0 || 0x9e3779b9;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = x & 0xff;
  }
  return out;
}

/** The shapes of {@link hugeBytes}. */
export type HugeShape = 'random' | 'zeros' | 'ones' | 'zeros-then-byte' | 'repeat-prefix';

/** The recipe of one huge input. */
export interface HugeRecipe {
  len: number;
  shape: HugeShape;
  seed: number;
  /** Bytes written over the start (e.g. a header). */
  lead: Uint8Array;
}

/** Builds the input a {@link HugeRecipe} describes (`prefix` for `repeat-prefix`). */
export function buildHuge(recipe: HugeRecipe, prefix?: Base): FuzzBytes {
  const { len, shape, seed, lead } = recipe;
  const out = new Uint8Array(len);
  if (shape === 'random') fillRandom(out, seed);
  if (shape === 'ones') out.fill(0xff);
  if (shape === 'zeros-then-byte') out[len - 1] = (seed % 255) + 1;
  if (shape === 'repeat-prefix' && prefix) {
    for (let i = 0; i < len; i += prefix.bytes.length) out.set(prefix.bytes.subarray(0, len - i), i);
  }
  out.set(lead.subarray(0, len));
  const leadHex = Buffer.from(lead).toString('hex');
  const of = shape === 'repeat-prefix' ? ` of ${prefix?.name}` : '';
  return new FuzzBytes(out, `huge(${len} bytes, ${shape}${of}, seed ${seed}, lead ${leadHex || '""'})`);
}

/**
 * Inputs of `minBytes`..`maxBytes` (e.g. 1–10 MB) in a few shapes: random, all zero, all 0xff,
 * zeros ending in one non-zero byte, and `prefix` (a valid input's head) repeated. Cheap to build and
 * described by their recipe, not their content.
 */
export function hugeBytes(minBytes: number, maxBytes: number, prefix?: Base): fc.Arbitrary<FuzzBytes> {
  const shapes: HugeShape[] = ['random', 'zeros', 'ones', 'zeros-then-byte'];
  if (prefix) shapes.push('repeat-prefix');
  return fc
    .record({
      len: fc.integer({ min: minBytes, max: maxBytes }),
      shape: fc.constantFrom(...shapes),
      seed: fc.nat(),
      lead: fc.uint8Array({ maxLength: 16 }),
    })
    .map((recipe) => buildHuge(recipe, prefix));
}

/** One input of every shape of {@link hugeBytes} at `len` bytes, to run before the generated ones. */
export function hugeExamples(len: number, prefix?: Base): FuzzBytes[] {
  const shapes: HugeShape[] = ['random', 'zeros', 'ones', 'zeros-then-byte', 'repeat-prefix'];
  return shapes
    .filter((s) => s !== 'repeat-prefix' || prefix)
    .map((shape) => buildHuge({ len, shape, seed: 1, lead: new Uint8Array() }, prefix));
}
