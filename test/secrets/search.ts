/**
 * Searching logs for secrets (test code only, issue 7 §5). A secret is searched for in every way a
 * careless log call could print it: lowercase and uppercase hex, Node's `<Buffer …>` spaced hex,
 * standard base64 and base64url with and without padding (and inside a longer base64 blob at byte
 * offsets 0, 1 and 2, without the edge characters the neighbours change), URL-encoded base64 (as
 * in a `kms_uri`), the JSON of a Buffer (`"data":[…]`, what pino prints for a Buffer field) and
 * of a Uint8Array (`{"0":…,"1":…}`), the raw bytes, and the text as JSON escapes it (latin1 and
 * utf8 readings), plus the raw text when it is printable.
 * PEM secrets are also searched by their DER bytes, each base64 body line and the private scalar.
 * The search is byte-exact over whole log files, so nothing is lost to line splitting or decoding.
 */
import { createPrivateKey } from 'node:crypto';

/** One secret to look for. */
export interface Secret {
  /** What it is, e.g. `master secret` or `worker-1 kubelet key`. */
  kind: string;
  value: Uint8Array;
}

/** One way of printing a secret. */
export interface Form {
  /** e.g. `hex`, `base64url-nopad`, `raw`. */
  name: string;
  bytes: Buffer;
}

/** A secret found in a log. */
export interface Hit {
  kind: string;
  form: string;
  source: string;
  /** 1-based line of the source where the form starts. */
  line: number;
}

/** Shortest form searched for: shorter strings could occur by chance. */
export const MIN_FORM_LENGTH = 16;

const isPrintable = (b: Buffer) =>
  b.every((c) => (c >= 0x20 && c < 0x7f) || c === 0x0a || c === 0x0d || c === 0x09);
const noPad = (s: string) => s.replace(/=+$/, '');
const toUrl = (s: string) => s.replace(/\+/g, '-').replace(/\//g, '_');

/**
 * The base64 characters that depend only on `value` when it sits `offset` bytes into a longer
 * blob: base64 of (offset filler bytes ‖ value) without the characters the filler or the
 * unknown following bytes touch.
 */
function base64AtOffset(value: Buffer, offset: number): string {
  const enc = Buffer.concat([Buffer.alloc(offset), value]).toString('base64');
  const first = Math.ceil((8 * offset) / 6);
  const last = Math.floor((8 * (offset + value.length)) / 6); // exclusive
  return enc.slice(first, last);
}

/** Every form of `value` searched for (deduplicated, at least {@link MIN_FORM_LENGTH} bytes). */
export function formsOf(value: Uint8Array): Form[] {
  const b = Buffer.from(value);
  const b64 = b.toString('base64');
  const forms: Array<[string, string | Buffer]> = [
    ['hex', b.toString('hex')],
    ['HEX', b.toString('hex').toUpperCase()],
    ['buffer-inspect-hex', [...b].map((x) => x.toString(16).padStart(2, '0')).join(' ')],
    ['base64', b64],
    ['base64-nopad', noPad(b64)],
    ['base64url', toUrl(b64)],
    ['base64url-nopad', noPad(toUrl(b64))],
    ...[0, 1, 2].flatMap(
      (o): Array<[string, string]> => [
        [`base64-in-blob@${o}`, base64AtOffset(b, o)],
        [`base64url-in-blob@${o}`, toUrl(base64AtOffset(b, o))],
      ],
    ),
    ['base64-urlencoded', encodeURIComponent(b64)],
    ['json-buffer-data', `[${[...b].join(',')}]`],
    ['json-uint8array', `{${[...b].map((x, i) => `"${i}":${x}`).join(',')}}`],
    ['raw-bytes', b],
    ['json-latin1', JSON.stringify(b.toString('latin1')).slice(1, -1)],
  ];
  const utf8 = b.toString('utf8');
  if (Buffer.from(utf8, 'utf8').equals(b)) forms.push(['json-utf8', JSON.stringify(utf8).slice(1, -1)]);
  if (isPrintable(b)) forms.push(['raw-text', utf8]);
  const seen = new Set<string>();
  const out: Form[] = [];
  for (const [name, f] of forms) {
    const bytes = typeof f === 'string' ? Buffer.from(f, 'utf8') : f;
    const key = bytes.toString('latin1');
    if (bytes.length < MIN_FORM_LENGTH || seen.has(key)) continue;
    seen.add(key);
    out.push({ name, bytes });
  }
  return out;
}

/**
 * A PEM private key as secrets: the PEM text, its DER bytes, each body line, and the private
 * scalar (`d`, as a JWK export would carry it).
 */
export function pemSecrets(kind: string, pem: string): Secret[] {
  const body = pem
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('-----'))
    .map((l) => l.trim());
  const out: Secret[] = [
    { kind: `${kind} (PEM text)`, value: Buffer.from(pem, 'utf8') },
    { kind: `${kind} (DER)`, value: Buffer.from(body.join(''), 'base64') },
  ];
  body.forEach((line, i) => {
    if (line.length >= MIN_FORM_LENGTH)
      out.push({ kind: `${kind} (PEM line ${i + 1})`, value: Buffer.from(line) });
  });
  const jwk = createPrivateKey(pem).export({ format: 'jwk' });
  if (typeof jwk.d === 'string')
    out.push({ kind: `${kind} (private scalar)`, value: Buffer.from(jwk.d, 'base64url') });
  return out;
}

/** Every occurrence of every form of every secret in every source. */
export function searchSecrets(
  sources: ReadonlyArray<{ name: string; data: Buffer }>,
  secrets: readonly Secret[],
): Hit[] {
  const hits: Hit[] = [];
  for (const secret of secrets) {
    for (const form of formsOf(secret.value)) {
      for (const source of sources) {
        for (
          let at = source.data.indexOf(form.bytes);
          at >= 0;
          at = source.data.indexOf(form.bytes, at + 1)
        ) {
          let line = 1;
          for (let i = source.data.indexOf(0x0a); i >= 0 && i < at; i = source.data.indexOf(0x0a, i + 1))
            line++;
          hits.push({ kind: secret.kind, form: form.name, source: source.name, line });
        }
      }
    }
  }
  return hits;
}
