/**
 * `confboot receipt <verb>`: join receipts, offline.
 *   verify  checks one receipt (a JWT in the EAR format, signed ES256 by a join service's receipt
 *           key) against a JWKS from a file or a URL, and prints its claims.
 * Exit 0 valid, 1 invalid (or the JWKS could not be fetched), 2 usage.
 */
import { readFile } from 'node:fs/promises';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { type JsonWebKeySet, parseJwks } from '../../adapters/receipts/receipt-key.js';
import {
  isReceiptVerificationError,
  MAX_RECEIPT_BYTES,
  verifyReceipt,
} from '../../adapters/receipts/verify-receipt.js';
import { messageOf } from '../../ports/errors.js';
import { type CommandSpec, renderHelp, runCommand, UsageError } from '../program/args.js';
import { runVerb, type Verb } from './verbs.js';

/** Flags of `confboot receipt verify`. */
export const verifyCommand: CommandSpec = {
  name: 'receipt verify',
  summary:
    "Verify a join receipt (EAR JWT, ES256) against the join service's JWKS and print its claims. RECEIPT is a file, or - for stdin.",
  options: {
    jwks: {
      type: 'string',
      valueName: 'FILE|URL',
      required: true,
      description:
        'JWKS of the receipt key: a file, or an http(s) URL such as http://<join-service>:30091/.well-known/jwks.json',
    },
    json: { type: 'boolean', description: 'print {valid, header, claims} (or {valid, error}) as JSON' },
  },
  epilog: [
    'Usage: confboot receipt verify --jwks FILE|URL [--json] RECEIPT',
    'The signature must verify with the JWKS key named by the receipt\'s "kid" (ES256 only), every part',
    'must be canonical base64url and the claims must be an EAR join receipt (docs/attestation-config.md,',
    '"Join receipts").',
    'Exit codes: 0 valid, 1 invalid or the JWKS could not be read, 2 usage error.',
  ].join('\n'),
};

/** Largest JWKS read or fetched. */
const MAX_JWKS_BYTES = 64 * 1024;
/** Bound on fetching a JWKS URL. */
const FETCH_TIMEOUT_MS = 10_000;

/** Thrown when the JWKS cannot be read: the verification could not run (exit 1). */
class JwksError extends Error {}

async function readBounded(path: string, what: string, max: number): Promise<string> {
  const data = path === '-' ? await readStdin(max) : await readFile(path);
  if (data.length > max) throw new UsageError(`${what} ${path} is larger than ${max} bytes`);
  return data.toString('utf8');
}

async function readStdin(max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of process.stdin) {
    const b = chunk as Buffer;
    total += b.length;
    chunks.push(b);
    if (total > max) break;
  }
  return Buffer.concat(chunks);
}

async function loadJwks(source: string): Promise<JsonWebKeySet> {
  let text: string;
  if (/^https?:\/\//i.test(source)) {
    try {
      const res = await fetch(source, { signal: AbortSignal.timeout(FETCH_TIMEOUT_MS), redirect: 'error' });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      const body = Buffer.from(await res.arrayBuffer());
      if (body.length > MAX_JWKS_BYTES) throw new Error(`larger than ${MAX_JWKS_BYTES} bytes`);
      text = body.toString('utf8');
    } catch (err) {
      throw new JwksError(`fetching JWKS ${source}: ${messageOf(err)}`);
    }
  } else {
    try {
      text = await readBounded(source, 'JWKS', MAX_JWKS_BYTES);
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError(`reading JWKS ${source}: ${messageOf(err)}`);
    }
  }
  try {
    return parseJwks(text);
  } catch (err) {
    throw new JwksError(`JWKS ${source}: ${messageOf(err)}`);
  }
}

async function verify(argv: string[]): Promise<number> {
  const options: NonNullable<ParseArgsConfig['options']> = {
    help: { type: 'boolean', short: 'h' },
    jwks: { type: 'string' },
    json: { type: 'boolean' },
  };
  let values: Record<string, unknown>;
  let positionals: string[];
  try {
    ({ values, positionals } = parseArgs({ args: argv, options, strict: true, allowPositionals: true }));
  } catch (err) {
    throw new UsageError(`${messageOf(err)}\n\n${renderHelp(verifyCommand)}`);
  }
  if (values.help) {
    process.stdout.write(`${renderHelp(verifyCommand)}\n`);
    return 0;
  }
  if (typeof values.jwks !== 'string' || values.jwks === '')
    throw new UsageError(`missing required option --jwks\n\n${renderHelp(verifyCommand)}`);
  if (positionals.length !== 1)
    throw new UsageError(
      `want exactly one RECEIPT (a file, or - for stdin), got ${positionals.length}\n\n${renderHelp(verifyCommand)}`,
    );
  const source = positionals[0] as string;
  let token: string;
  try {
    token = await readBounded(source, 'receipt', MAX_RECEIPT_BYTES);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`reading receipt ${source}: ${messageOf(err)}`);
  }
  const json = Boolean(values.json);
  const refuse = (why: string): number => {
    if (json) process.stdout.write(`${JSON.stringify({ valid: false, error: why }, null, 2)}\n`);
    process.stderr.write(`confboot receipt verify: receipt is NOT valid: ${why}\n`);
    return 1;
  };
  let jwks: JsonWebKeySet;
  try {
    jwks = await loadJwks(values.jwks);
  } catch (err) {
    if (err instanceof JwksError) return refuse(err.message);
    throw err;
  }
  try {
    const { header, claims } = await verifyReceipt(token, jwks);
    if (json) process.stdout.write(`${JSON.stringify({ valid: true, header, claims }, null, 2)}\n`);
    else {
      const s = claims['confboot.receipt'];
      process.stdout.write(
        [
          `receipt valid: signed ${header.alg} by key ${header.kid ?? '(no kid)'}`,
          `node ${s.node ?? '(rejoin)'} disk ${s.diskUuid} variant ${s.variant} measurement set ${s.measurementSet}`,
          `issued ${new Date(claims.iat * 1000).toISOString()} (${s.rpc}, caller ${s.peer})`,
          ...Object.entries(claims.submods).map(([name, a]) => `  ${name}: ${a['ear.status']}`),
          'claims:',
          JSON.stringify(claims, null, 2),
          '',
        ].join('\n'),
      );
    }
    return 0;
  } catch (err) {
    if (isReceiptVerificationError(err)) return refuse(err.message);
    throw err;
  }
}

const VERBS: Record<string, Verb> = {
  verify: {
    summary: "check a join receipt against the join service's JWKS and print its claims",
    run: (argv) => runCommand(() => verify(argv)),
  },
};

export function run(argv: string[]): Promise<number> {
  return runVerb('receipt', VERBS, argv);
}
