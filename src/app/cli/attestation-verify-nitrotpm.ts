/**
 * `confboot attestation verify-nitrotpm`: verifies one AWS NitroTPM attestation document — the
 * COSE_Sign1 ES384 signature, the chain from its cabundle to the pinned AWS Nitro root, validity at
 * `--at` (default now), and the nonce — and prints every check and the signed contents (module,
 * timestamp, PCRs, public key). Exit 0 accepted, 1 refused, 2 usage or input error.
 */
import { readFile } from 'node:fs/promises';
import { CheckRecorder } from '../../adapters/attestation/shared/checks.js';
import {
  AWS_NITRO_ROOT_SHA256,
  type NitroTpmDocument,
  verifyNitroTpmDocument,
} from '../../adapters/attestation/shared/nitrotpm-document.js';
import { AttestationError, messageOf } from '../../ports/errors.js';
import { runCommand, UsageError } from '../program/args.js';
import { defineCommand, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { OUTPUT_OPTION } from '../program/shared-options.js';
import { parseAt } from './attestation-verify-snp.js';

const spec = defineCommand({
  name: 'attestation verify-nitrotpm',
  summary: 'Verify an AWS NitroTPM attestation document and list every check.',
  options: {
    document: {
      type: 'string',
      valueName: 'FILE',
      required: true,
      description: 'the document (CBOR COSE_Sign1), binary or hex',
    },
    nonce: {
      type: 'string',
      valueName: 'HEX',
      required: true,
      description: 'the nonce the document must carry',
    },
    at: {
      type: 'string',
      valueName: 'RFC3339',
      description:
        "time at which the certificates must be valid (default now; a document's leaf lives three hours)",
    },
    'root-sha256': {
      type: 'string',
      valueName: 'HEX',
      default: AWS_NITRO_ROOT_SHA256,
      description: "SHA-256 of the trusted root certificate's DER (default AWS's Nitro root)",
    },
    output: OUTPUT_OPTION,
  },
  epilog: [
    "The root is the first certificate of the document's cabundle; it is trusted only when its SHA-256",
    'equals --root-sha256.',
  ].join('\n'),
  exitCodes: { 0: 'accepted', 1: 'refused (the failing check is printed)' },
});

const MAX_FILE_BYTES = 1024 * 1024;

async function readDocument(path: string): Promise<Buffer> {
  let data: Buffer;
  try {
    data = await readFile(path);
  } catch (err) {
    throw new UsageError(`reading document ${path}: ${messageOf(err)}`);
  }
  if (data.length > MAX_FILE_BYTES) throw new UsageError(`document ${path} is larger than 1 MiB`);
  const text = data.toString('latin1').trim();
  if (text.length > 0 && /^[0-9a-fA-F\s]+$/.test(text)) {
    const hex = text.replace(/\s+/g, '');
    if (hex.length % 2 !== 0) throw new UsageError(`document ${path}: odd number of hex digits`);
    return Buffer.from(hex, 'hex');
  }
  return data;
}

function parseNonce(v: string): Buffer {
  const clean = v.replace(/^0x/, '');
  if (clean.length === 0 || !/^([0-9a-fA-F]{2})+$/.test(clean))
    throw new UsageError(`--nonce is not hex: ${JSON.stringify(v)}`);
  return Buffer.from(clean, 'hex');
}

function summary(doc: NitroTpmDocument) {
  const hex = (b: Uint8Array | undefined) => (b === undefined ? null : Buffer.from(b).toString('hex'));
  return {
    moduleId: doc.moduleId,
    timestamp: doc.timestamp.toISOString(),
    pcrs: Object.fromEntries([...doc.pcrs].map(([i, v]) => [String(i), hex(v)])),
    publicKey: hex(doc.publicKey),
    userData: hex(doc.userData),
    nonce: hex(doc.nonce),
  };
}

/** Runs `confboot attestation verify-nitrotpm`. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const values = parseOptions(argv, spec);
    if (values === undefined) return 0;
    const at = parseAt(values.at);
    const nonce = parseNonce(values.nonce);
    const root = values['root-sha256'].toLowerCase();
    if (!/^[0-9a-f]{64}$/.test(root)) throw new UsageError('--root-sha256 must be 64 hex digits');
    const bytes = await readDocument(values.document);

    const rec = new CheckRecorder();
    let doc: NitroTpmDocument | undefined;
    let failure: AttestationError | undefined;
    try {
      doc = verifyNitroTpmDocument(bytes, { at, nonce, rootSha256: [root] }, rec);
    } catch (err) {
      if (!(err instanceof AttestationError)) throw err;
      failure = err;
    }
    const result = {
      accepted: doc !== undefined,
      at: at.toISOString(),
      checks: rec.checks,
      ...(failure ? { failedCheck: failure.check } : {}),
      ...(doc ? { document: summary(doc) } : {}),
    };
    return printResult(values.output, 'attestation verify-nitrotpm', doc ? 0 : 1, result, renderResult);
  });
}

/** The result for people: every check, the signed contents, the verdict. */
function renderResult(r: {
  accepted: boolean;
  checks: readonly { ok: boolean; name: string; detail?: string }[];
  failedCheck?: string;
  document?: ReturnType<typeof summary>;
}): string {
  const lines = r.checks.map((c) => `${c.ok ? 'PASS' : 'FAIL'}  ${c.name}: ${c.detail ?? ''}`);
  const s = r.document;
  if (s) {
    lines.push(`module ${s.moduleId}, signed ${s.timestamp}`);
    for (const [i, v] of Object.entries(s.pcrs)) lines.push(`PCR${i} (sha384) ${v}`);
    lines.push(`public_key ${s.publicKey ?? '(none)'}`);
  }
  lines.push(r.accepted ? 'ACCEPTED' : `REFUSED (${r.failedCheck})`);
  return lines.join('\n');
}

/** The command's option table. */
export const commandSpecs = [spec];
