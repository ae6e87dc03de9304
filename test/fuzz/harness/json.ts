/**
 * Structure-aware JSON mutation for the fuzz properties: pick a path inside a valid document and
 * replace, delete or wrap the value there, or add an unknown key, with edge values (wrong types,
 * non-base64 strings, huge and negative numbers, nesting). The result prints as its edit list.
 */
import fc from 'fast-check';

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** One edit at the `at`-th path (modulo the number of paths) of a document. */
export type JsonEdit =
  | { op: 'replace'; at: number; value: Json }
  | { op: 'delete'; at: number }
  | { op: 'wrap'; at: number }
  | { op: 'add'; at: number; key: string; value: Json };

/** A mutated JSON document with its recipe. */
export class FuzzJson {
  constructor(
    readonly value: unknown,
    readonly recipe: string,
  ) {}

  /** UTF-8 JSON text of the value. */
  get bytes(): Uint8Array {
    return new TextEncoder().encode(JSON.stringify(this.value) ?? 'null');
  }

  /** Used by fast-check when it prints a counterexample. */
  [fc.toStringMethod](): string {
    return this.recipe;
  }
}

/** Edge JSON values: wrong types, odd numbers, odd strings, small structures. */
export const edgeJson: fc.Arbitrary<Json> = fc.oneof(
  fc.constantFrom<Json>(
    null,
    true,
    false,
    0,
    -1,
    1.5,
    2 ** 31,
    2 ** 32,
    2 ** 53,
    -(2 ** 53),
    1e308,
    '',
    '=',
    'AA',
    'AAA=',
    '====',
    'not base64!',
    '-_-_',
    '0',
    '31',
    '32',
    '-1',
    '01',
    '1e3',
    'ff',
    'zz',
    '\u0000',
    '\ud800',
    'dynamic',
    'luks2',
    [],
    {},
    [null],
    { '': null },
  ),
  fc.base64String({ maxLength: 64 }),
  fc.uint8Array({ maxLength: 50 }).map((b) => Buffer.from(b).toString('hex')),
  fc.string({ maxLength: 20 }),
  fc.integer(),
  fc.double(),
  fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>,
);

/** Every path (list of keys/indices) in `v`, the root included. */
export function jsonPaths(v: unknown, prefix: Array<string | number> = []): Array<Array<string | number>> {
  const out: Array<Array<string | number>> = [];
  const walk = (x: unknown, p: Array<string | number>) => {
    out.push(p);
    if (Array.isArray(x)) for (let i = 0; i < x.length; i++) walk(x[i], [...p, i]);
    else if (x !== null && typeof x === 'object') for (const [k, y] of Object.entries(x)) walk(y, [...p, k]);
  };
  walk(v, prefix);
  return out;
}

function applyEdit(doc: unknown, edit: JsonEdit): { doc: unknown; text: string } {
  // A JSON round trip keeps an own "__proto__" key as JSON.parse creates it (structuredClone may not).
  const copy: unknown = doc === undefined ? undefined : JSON.parse(JSON.stringify(doc));
  const paths = jsonPaths(copy);
  const path = paths[edit.at % paths.length] as Array<string | number>;
  const where = path.length ? path.join('.') : '(root)';
  const get = (p: Array<string | number>) =>
    p.reduce<unknown>((o, k) => (o as Record<string | number, unknown>)[k], copy);
  const set = (value: unknown): unknown => {
    if (path.length === 0) return value;
    const parent = get(path.slice(0, -1)) as Record<string | number, unknown>;
    parent[path[path.length - 1] as string | number] = value;
    return copy;
  };
  switch (edit.op) {
    case 'replace':
      return { doc: set(edit.value), text: `${where}=${JSON.stringify(edit.value)}` };
    case 'wrap':
      return { doc: set([get(path)]), text: `${where}=[${where}]` };
    case 'delete': {
      if (path.length === 0) return { doc: undefined, text: 'delete (root)' };
      const parent = get(path.slice(0, -1));
      const key = path[path.length - 1] as string | number;
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else delete (parent as Record<string, unknown>)[key];
      return { doc: copy, text: `delete ${where}` };
    }
    case 'add': {
      const target = get(path);
      if (target === null || typeof target !== 'object' || Array.isArray(target))
        return { doc: copy, text: `add at ${where} (not an object, no-op)` };
      Object.defineProperty(target, edit.key, {
        value: edit.value,
        enumerable: true,
        writable: true,
        configurable: true,
      });
      return { doc: copy, text: `${where}.${JSON.stringify(edit.key)}+=${JSON.stringify(edit.value)}` };
    }
  }
}

const jsonEdit: fc.Arbitrary<JsonEdit> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('replace' as const), at: fc.nat(), value: edgeJson }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('delete' as const), at: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('wrap' as const), at: fc.nat() }) },
  {
    weight: 2,
    arbitrary: fc.record({
      op: fc.constant('add' as const),
      at: fc.nat(),
      key: fc.oneof(
        fc.constantFrom('__proto__', 'constructor', '0', '32', 'requirements', 'flags'),
        fc.string({ maxLength: 8 }),
      ),
      value: edgeJson,
    }),
  },
);

/** 1 to `maxEdits` edits of one of `bases` (JSON values). */
export function jsonMutated(
  bases: Array<{ name: string; value: unknown }>,
  maxEdits = 3,
): fc.Arbitrary<FuzzJson> {
  return fc
    .tuple(fc.nat({ max: bases.length - 1 }), fc.array(jsonEdit, { minLength: 1, maxLength: maxEdits }))
    .map(([i, edits]) => {
      const base = bases[i] as { name: string; value: unknown };
      let doc = base.value;
      const texts: string[] = [];
      for (const e of edits) {
        const r = applyEdit(doc, e);
        doc = r.doc;
        texts.push(r.text);
      }
      return new FuzzJson(doc, `jsonEdit(${base.name}, [${texts.join('; ')}])`);
    });
}
