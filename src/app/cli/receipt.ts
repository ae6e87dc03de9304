/**
 * `confboot receipt <verb>`: join receipts.
 *   verify  checks one receipt (a JWT in the EAR format, signed ES256 over P-256 in low-S form by a
 *           join service's receipt key) against a JWKS from a file or an https URL, optionally pins
 *           the signing key (`--kid`, `--jwks-sha256`), requires every component's EAR status to be
 *           at least `--require-status`, and prints the claims. Offline but for the URL.
 *   jwks    reads the receipt key through the cluster's CA-verified Kubernetes API (the admin
 *           kubeconfig) and prints its public JWKS, kid and thumbprint: the trusted way to get them.
 * Exit 0 valid / printed, 1 invalid, not accepted or unreadable, 2 usage.
 */
import { readFilePrefix, readPrefix } from '../../adapters/fs/read-prefix.js';
import { fetchJwksText, isJwksFetchError } from '../../adapters/receipts/fetch-jwks.js';
import { type JsonWebKeySet, parseJwks } from '../../adapters/receipts/receipt-key.js';
import { isSha256Hex } from '../../adapters/receipts/receipt-key-pin.js';
import {
  EAR_STATUS_ORDER,
  isEarStatus,
  isReceiptVerificationError,
  MAX_RECEIPT_BYTES,
  type ReceiptPins,
  submodsBelow,
  verifyReceipt,
} from '../../adapters/receipts/verify-receipt.js';
import { importOptionalPeer } from '../../adapters/system/optional-peer.js';
import { messageOf } from '../../ports/errors.js';
import type { EarStatus } from '../../ports/receipt-signer.js';
import { RECEIPT_KEY_SECRET_REF } from '../manifests/common.js';
import { runCommand, UsageError } from '../program/args.js';
import {
  defineCommand,
  type OptionValues,
  parseOptions,
  parseOptionsAndOperand,
} from '../program/options.js';
import { printResult } from '../program/output.js';
import { OUTPUT_OPTION } from '../program/shared-options.js';
import { runVerb, type Verb } from './verbs.js';

/** Flags of `confboot receipt verify`. */
export const verifyCommand = defineCommand({
  name: 'receipt verify',
  summary:
    "Verify a join receipt (EAR JWT, ES256) against the join service's JWKS and print its claims. RECEIPT is a file, or - for stdin.",
  operand: { name: 'RECEIPT', description: 'the receipt: a file, or - for stdin' },
  options: {
    jwks: {
      type: 'string',
      valueName: 'FILE|URL',
      required: true,
      description:
        'JWKS of the receipt key: a file (e.g. from confboot receipt jwks --kubeconfig F), or an https:// URL (needs --kid or --jwks-sha256)',
    },
    kid: {
      type: 'string',
      valueName: 'K',
      description:
        'pin: the receipt must name this key ID (confboot init/apply print it as "Receipt key kid")',
      parse: (raw: string) => {
        if (raw === '') throw new UsageError('--kid must not be empty');
        return raw;
      },
    },
    'jwks-sha256': {
      type: 'string',
      valueName: 'HEX',
      description:
        'pin: the RFC 7638 SHA-256 thumbprint, in hex, of the JWKS key the receipt\'s kid selects (init/apply print it as "Receipt key jwks-sha256")',
      parse: (raw: string) => {
        if (!isSha256Hex(raw))
          throw new UsageError(`--jwks-sha256 must be 64 hex digits (a SHA-256), got ${JSON.stringify(raw)}`);
        return raw.toLowerCase();
      },
    },
    'insecure-jwks-url': {
      type: 'boolean',
      description: 'allow an http:// JWKS URL (anyone on the path can answer it; a pin still decides)',
    },
    'require-status': {
      type: 'string',
      valueName: 'STATUS',
      default: 'affirming',
      description: `every component's ear.status must be at least STATUS (${[...EAR_STATUS_ORDER].reverse().join(' > ')})`,
      parse: (raw: string): EarStatus => {
        if (!isEarStatus(raw))
          throw new UsageError(
            `--require-status must be one of ${EAR_STATUS_ORDER.join(', ')}, got ${JSON.stringify(raw)}`,
          );
        return raw;
      },
    },
    output: OUTPUT_OPTION,
  },
  epilog: [
    'The signature must verify with the JWKS key named by the receipt\'s "kid" (ES256 over P-256 only, low-S:',
    "s <= n/2), that kid must be the key's own RFC 7638 thumbprint, every part must be canonical base64url",
    'and the claims must be an EAR join receipt (docs/attestation-config.md, "Join receipts").',
    'Whoever serves a JWKS URL can put any key in it: a URL needs a pin (--kid or --jwks-sha256, from the',
    'output of confboot init/apply or confboot receipt jwks), and http:// also --insecure-jwks-url.',
    '-o json prints {valid, header, claims, key} (or {valid, error}) as the result.',
  ].join('\n'),
  exitCodes: {
    0: 'valid and every status at least --require-status',
    1: 'invalid, a status below it or the JWKS could not be read',
  },
});

/** Flags of `confboot receipt jwks`. */
export const jwksCommand = defineCommand({
  name: 'receipt jwks',
  summary:
    "Print the join receipt key's public JWKS (stdout) and its kid and RFC 7638 SHA-256 thumbprint (stderr), read through the cluster's Kubernetes API.",
  options: {
    kubeconfig: {
      type: 'string',
      valueName: 'F',
      default: 'constellation-admin.conf',
      description: 'admin kubeconfig from confboot init (its CA authenticates the API server)',
    },
    output: OUTPUT_OPTION,
  },
  epilog: [
    `Reads ${RECEIPT_KEY_SECRET_REF} (which confboot apply creates and every join-service replica mounts)`,
    'and prints only its public half. Save it for offline checks:',
    '  confboot receipt jwks --kubeconfig constellation-admin.conf > jwks.json',
    '-o json prints {jwks, kid, jwksSha256} as the result.',
  ].join('\n'),
  exitCodes: { 0: 'printed', 1: 'no key in the cluster or the API could not be read' },
});

/** Largest JWKS read or fetched. */
const MAX_JWKS_BYTES = 64 * 1024;
/** Bound on fetching a JWKS URL. */
const FETCH_TIMEOUT_MS = 10_000;

/** Thrown when the JWKS cannot be read: the verification could not run (exit 1). */
class JwksError extends Error {}

/** A file (or `-`, stdin) of at most `max` bytes; reading stops after `max + 1`, so a larger one is never read whole. */
async function readBounded(path: string, what: string, max: number): Promise<string> {
  const data = await (path === '-' ? readPrefix(process.stdin, max) : readFilePrefix(path, max));
  if (data.length > max) throw new UsageError(`${what} ${path} is larger than ${max} bytes`);
  return data.toString('utf8');
}

/** The parsed flags of `receipt verify`. */
interface VerifyFlags {
  jwks: string;
  isUrl: boolean;
  pins: ReceiptPins;
  requireStatus: EarStatus;
  json: boolean;
  receipt: string;
}

/** Checks the flags of `receipt verify` together; throws UsageError for any that do not fit. */
function verifyFlags(values: OptionValues<typeof verifyCommand.options>, receipt: string): VerifyFlags {
  const pins: ReceiptPins = {
    ...(values.kid === undefined ? {} : { kid: values.kid }),
    ...(values['jwks-sha256'] === undefined ? {} : { jwksSha256: values['jwks-sha256'] }),
  };
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(values.jwks)?.[1]?.toLowerCase();
  if (scheme !== undefined) {
    if (scheme === 'http' && !values['insecure-jwks-url'])
      throw new UsageError(
        `--jwks ${values.jwks} is plain HTTP, which anyone on the path can answer: use confboot receipt jwks --kubeconfig F > jwks.json, an https:// URL, or --insecure-jwks-url`,
      );
    if (scheme !== 'http' && scheme !== 'https')
      throw new UsageError(`--jwks: unsupported URL scheme ${scheme}`);
    if (pins.kid === undefined && pins.jwksSha256 === undefined)
      throw new UsageError(
        `--jwks ${values.jwks} is a URL, and whoever answers it decides its keys: pin the key with --kid or --jwks-sha256 (printed by confboot init/apply and confboot receipt jwks)`,
      );
  }
  return {
    jwks: values.jwks,
    isUrl: scheme !== undefined,
    pins,
    requireStatus: values['require-status'],
    json: values.output === 'json',
    receipt,
  };
}

async function loadJwks(source: string, isUrl: boolean): Promise<JsonWebKeySet> {
  let text: string;
  if (isUrl) {
    try {
      text = await fetchJwksText(source, { maxBytes: MAX_JWKS_BYTES, timeoutInMs: FETCH_TIMEOUT_MS });
    } catch (err) {
      if (isJwksFetchError(err)) throw new JwksError(err.message);
      throw err;
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
  const parsed = parseOptionsAndOperand(argv, verifyCommand);
  if (parsed === undefined) return 0;
  const flags = verifyFlags(parsed.values, parsed.operand);
  let token: string;
  try {
    token = await readBounded(flags.receipt, 'receipt', MAX_RECEIPT_BYTES);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`reading receipt ${flags.receipt}: ${messageOf(err)}`);
  }
  const refuse = (why: string, extra: Record<string, unknown> = {}): number => {
    if (flags.json)
      printResult('json', 'receipt verify', 1, { valid: false, error: why, ...extra }, () => '');
    process.stderr.write(`confboot receipt verify: receipt is NOT valid: ${why}\n`);
    return 1;
  };
  let jwks: JsonWebKeySet;
  try {
    jwks = await loadJwks(flags.jwks, flags.isUrl);
  } catch (err) {
    if (err instanceof JwksError) return refuse(err.message);
    throw err;
  }
  let verified: Awaited<ReturnType<typeof verifyReceipt>>;
  try {
    verified = await verifyReceipt(token, jwks, flags.pins);
  } catch (err) {
    if (isReceiptVerificationError(err)) return refuse(err.message);
    throw err;
  }
  const { header, claims, key } = verified;
  const below = submodsBelow(claims, flags.requireStatus);
  if (below.length > 0)
    return refuse(
      `${below.map((b) => `${b.name} is ${b.status}`).join(', ')}; --require-status ${flags.requireStatus} wants every component at least ${flags.requireStatus}`,
      { header, claims },
    );
  if (flags.json)
    return printResult('json', 'receipt verify', 0, { valid: true, header, claims, key }, () => '');
  const pinned = flags.pins.kid !== undefined || flags.pins.jwksSha256 !== undefined;
  const s = claims['confboot.receipt'];
  process.stdout.write(
    [
      `receipt valid: signed ${header.alg} by key ${key.kid} (jwks-sha256 ${key.jwksSha256}, ${pinned ? 'pinned' : 'not pinned: trusted because the JWKS file is'})`,
      `node ${s.node ?? '(rejoin)'} disk ${s.diskUuid} variant ${s.variant} measurement set ${s.measurementSet}`,
      `issued ${new Date(claims.iat * 1000).toISOString()} (${s.rpc}, caller ${s.peer})`,
      `every component at least ${flags.requireStatus}:`,
      ...Object.entries(claims.submods).map(([name, a]) => `  ${name}: ${a['ear.status']}`),
      'claims:',
      JSON.stringify(claims, null, 2),
      '',
    ].join('\n'),
  );
  return 0;
}

async function jwks(argv: string[]): Promise<number> {
  const v = parseOptions(argv, jwksCommand);
  if (v === undefined) return 0;
  // The Kubernetes client is an optional peer: `receipt verify` runs without it, only jwks loads it.
  const [{ loadKubeConfig }, { readClusterReceiptKey, receiptKeyLines }] = await importOptionalPeer(() =>
    Promise.all([import('../../adapters/kubernetes/api.js'), import('../bringup/receipt-key.js')]),
  );
  const key = await readClusterReceiptKey(loadKubeConfig(v.kubeconfig));
  if (key === undefined) {
    process.stderr.write(
      `confboot receipt jwks: no join receipt key: ${RECEIPT_KEY_SECRET_REF} does not exist (confboot apply creates it)\n`,
    );
    return 1;
  }
  if (v.output === 'json')
    return printResult('json', 'receipt jwks', 0, { jwks: key.jwks, ...key.pin }, () => '');
  process.stdout.write(`${JSON.stringify(key.jwks, null, 2)}\n`);
  process.stderr.write(
    receiptKeyLines(key.pin)
      .map((line) => `${line}\n`)
      .join(''),
  );
  return 0;
}

const VERBS: Record<string, Verb> = {
  verify: {
    summary: "check a join receipt against the join service's JWKS (pinned) and print its claims",
    run: (argv) => runCommand(() => verify(argv)),
  },
  jwks: {
    summary: "print the receipt key's JWKS, kid and thumbprint, read through the cluster's Kubernetes API",
    run: (argv) => runCommand(() => jwks(argv)),
  },
};

/** Runs `confboot receipt <verb>`. */
export function run(argv: string[]): Promise<number> {
  return runVerb('receipt', VERBS, argv);
}

/** Every verb's option table. */
export const commandSpecs = [verifyCommand, jwksCommand];
