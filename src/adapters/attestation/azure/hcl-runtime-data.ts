/**
 * Azure's HCL (host compatibility layer) report binds the vTPM attestation key to the hardware
 * report: report_data[0:32] = SHA-256(runtime data), and the runtime data is JSON whose `keys[0]`
 * (`HCLAkPub`) is the AK as an RSA JWK. Used by azure-sev-snp (SNP report) and azure-tdx (TD
 * report inside the quote).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { messageOf } from '../../../ports/errors.js';
import type { CheckRecorder } from '../shared/checks.js';

/** The AK as the TPM stores it: modulus and exponent (0 means the default 65537). */
export interface RsaAk {
  modulus: Uint8Array;
  exponent: number;
}

function stripZeros(b: Uint8Array): Uint8Array {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  return b.subarray(i);
}

function exponentBytes(e: number): Uint8Array {
  const h = e.toString(16);
  return Buffer.from(h.length % 2 ? `0${h}` : h, 'hex');
}

/**
 * Checks that `reportData[0:32]` is SHA-256(`runtimeData`) and that the runtime data's first key is
 * `ak`. Records two checks in `rec` (`hcl-runtime-data-hash`, `hcl-ak`) and goes on; never throws.
 */
export function checkHclRuntimeData(
  reportData: Uint8Array,
  runtimeData: Uint8Array,
  ak: RsaAk | undefined,
  rec: CheckRecorder,
): void {
  const digest = createHash('sha256').update(runtimeData).digest();
  const head = reportData.subarray(0, 32);
  const hashOk = head.length === 32 && timingSafeEqual(head, digest);
  rec.record(
    'hcl-runtime-data-hash',
    hashOk,
    hashOk
      ? 'report_data[0:32] = SHA-256(runtime data)'
      : `report_data[0:32] ${Buffer.from(head).toString('hex')} is not SHA-256(runtime data) ${digest.toString('hex')}`,
  );
  try {
    const ok = runtimeDataKeyIs(runtimeData, ak);
    rec.record(
      'hcl-ak',
      ok,
      ok
        ? 'runtime data keys[0] is the attestation key'
        : 'runtime data keys[0] (n, e) differs from the attestation key',
    );
  } catch (err) {
    rec.record('hcl-ak', false, `runtime data: ${messageOf(err)}`);
  }
}

/** Whether the runtime data's keys[0] (an RSA JWK) is `ak`; throws when there is no such key. */
function runtimeDataKeyIs(runtimeData: Uint8Array, ak: RsaAk | undefined): boolean {
  const parsed = JSON.parse(Buffer.from(runtimeData).toString('utf8')) as {
    keys?: { n?: unknown; e?: unknown }[];
  };
  const first = parsed.keys?.[0];
  if (first === undefined || typeof first.n !== 'string' || typeof first.e !== 'string')
    throw new Error('runtime data has no keys[0] with n and e');
  if (ak === undefined) throw new Error('the attestation key is not an RSA key');
  const n = stripZeros(Buffer.from(first.n, 'base64url'));
  const e = stripZeros(Buffer.from(first.e, 'base64url'));
  const akN = stripZeros(ak.modulus);
  const akE = exponentBytes(ak.exponent === 0 ? 65537 : ak.exponent);
  return (
    Buffer.compare(Buffer.from(n), Buffer.from(akN)) === 0 &&
    Buffer.compare(Buffer.from(e), Buffer.from(akE)) === 0
  );
}
