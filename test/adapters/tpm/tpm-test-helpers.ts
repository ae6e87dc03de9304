/**
 * Independent checks for the TPM adapter tests: run tpm2-tools directly (tpm2_checkquote as the
 * outside verifier) and read the few TPM structure fields the tests look at, without going through
 * the adapter's own parser.
 */
import { execFile } from 'node:child_process';
import { createPublicKey } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

/** Runs a tpm2-tools command against `tcti`; returns stdout, throws with stderr on failure. */
export async function tpm2(tcti: string, tool: string, args: string[]): Promise<string> {
  const { stdout } = await execFileP(tool, args, {
    env: { ...process.env, TPM2TOOLS_TCTI: tcti },
    timeout: 10_000,
  });
  return stdout;
}

/** PEM of an RSA TPMT_PUBLIC (type RSA, 22-byte parameter prefix, exponent 0 = 65537). */
export function rsaAkPem(tpmtPublic: Uint8Array): string {
  const buf = Buffer.from(tpmtPublic);
  if (buf.readUInt16BE(0) !== 0x0001) throw new Error('not an RSA TPMT_PUBLIC');
  const exponent = buf.readUInt32BE(18) || 65537;
  const size = buf.readUInt16BE(22);
  const n = buf.subarray(24, 24 + size);
  const e = Buffer.alloc(4);
  e.writeUInt32BE(exponent);
  const key = createPublicKey({
    key: {
      kty: 'RSA',
      n: n.toString('base64url'),
      e: e.subarray(e.findIndex((b) => b !== 0)).toString('base64url'),
    },
    format: 'jwk',
  });
  return key.export({ type: 'spki', format: 'pem' }).toString();
}

/**
 * Verifies a quote with the real `tpm2_checkquote` (signature with `akPem`, and qualifying data).
 * Returns true when the tool accepts it.
 */
export async function checkQuote(
  dir: string,
  akPem: string,
  quote: Uint8Array,
  rawSig: Uint8Array,
  qualifyingData: Uint8Array,
): Promise<boolean> {
  const tag = Math.random().toString(36).slice(2);
  const pem = join(dir, `ak-${tag}.pem`);
  const msg = join(dir, `quote-${tag}.msg`);
  const sig = join(dir, `quote-${tag}.sig`);
  writeFileSync(pem, akPem);
  writeFileSync(msg, quote);
  writeFileSync(sig, rawSig);
  const args = ['-u', pem, '-m', msg, '-s', sig, '-g', 'sha256'];
  if (qualifyingData.length > 0) args.push('-q', Buffer.from(qualifyingData).toString('hex'));
  try {
    await execFileP('tpm2_checkquote', args, { timeout: 10_000 });
    return true;
  } catch {
    return false;
  }
}

/** TPMS_ATTEST.extraData, read by offsets: magic(4) type(2) qualifiedSigner(TPM2B) extraData(TPM2B). */
export function extraDataOf(attest: Uint8Array): Buffer {
  const buf = Buffer.from(attest);
  const signerSize = buf.readUInt16BE(6);
  const at = 8 + signerSize;
  return buf.subarray(at + 2, at + 2 + buf.readUInt16BE(at));
}

/** TPMS_ATTEST's trailing pcrDigest (TPM2B of 32 bytes for a SHA-256-signing AK). */
export function pcrDigestOf(attest: Uint8Array): Buffer {
  const buf = Buffer.from(attest);
  expectSize(buf.readUInt16BE(buf.length - 34), 32);
  return buf.subarray(buf.length - 32);
}

function expectSize(actual: number, expected: number): void {
  if (actual !== expected) throw new Error(`pcrDigest size ${actual}, expected ${expected}`);
}

/** Handles listed by `tpm2_getcap handles-<kind>`. */
export async function handles(tcti: string, kind: 'transient' | 'persistent'): Promise<number[]> {
  const out = await tpm2(tcti, 'tpm2_getcap', [`handles-${kind}`]);
  return [...out.matchAll(/0x[0-9a-f]+/gi)].map((m) => Number.parseInt(m[0], 16));
}
