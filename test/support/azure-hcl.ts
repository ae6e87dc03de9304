/**
 * Test support for Azure's HCL (host compatibility layer), which cannot exist on this machine: it
 * SIMULATES what the HCL does on an Azure CVM — provision the AK at 0x81000003 and write its report
 * into vTPM NV index 0x01400001 — on a REAL swtpm through tpm2-tools, and builds the runtime data
 * JSON that names the AK. Used by the azure-sev-snp and azure-tdx issuer tests.
 */
import { execFile } from 'node:child_process';
import { createPublicKey } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Defines (or redefines) NV index `index` on the TPM at `tcti` with exactly `bytes`, owner read/write. */
export async function writeNvIndex(tcti: string, index: number, bytes: Uint8Array): Promise<void> {
  const env = { ...process.env, TPM2TOOLS_TCTI: tcti };
  const handle = `0x${index.toString(16).padStart(8, '0')}`;
  await run('tpm2_nvundefine', ['-C', 'o', handle], { env }).catch(() => undefined);
  await run('tpm2_nvdefine', [handle, '-C', 'o', '-s', String(bytes.length), '-a', 'ownerread|ownerwrite'], {
    env,
  });
  const dir = mkdtempSync(join(tmpdir(), 'confboot-hcl-'));
  try {
    writeFileSync(join(dir, 'hcl.bin'), bytes);
    await run('tpm2_nvwrite', [handle, '-C', 'o', '-i', join(dir, 'hcl.bin')], { env });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** HCL runtime data (JSON) naming the RSA key `akPem` as `HCLAkPub`, as Azure's HCL writes it. */
export function hclRuntimeData(akPem: string): Uint8Array {
  const jwk = createPublicKey(akPem).export({ format: 'jwk' });
  return new TextEncoder().encode(
    JSON.stringify({
      keys: [{ kid: 'HCLAkPub', key_ops: ['sign'], kty: 'RSA', e: jwk.e, n: jwk.n }],
      'vm-configuration': { 'secure-boot': true, 'tpm-enabled': true, vmUniqueId: 'test-vm' },
    }),
  );
}

/** Header fields Azure's HCL puts before and after the hardware report. */
export const HCL_LAYOUT = {
  /** The hardware report (SNP report or TDREPORT) starts here. */
  reportOffset: 32,
  /** The IGVM request data (size, version, report type, hash type, runtime size) starts here. */
  requestDataOffset: 1216,
  /** The runtime data starts here. */
  runtimeDataOffset: 1236,
} as const;

/**
 * An HCL report: "HCLA" header, `hardwareReport` at 32 (at most 1184 bytes), the IGVM request data
 * with `reportType` (2 = SEV-SNP, 4 = TDX) at 1216 and `runtime` at 1236.
 */
export function buildHclReport(
  hardwareReport: Uint8Array,
  reportType: number,
  runtime: Uint8Array,
): Uint8Array {
  if (hardwareReport.length > HCL_LAYOUT.requestDataOffset - HCL_LAYOUT.reportOffset)
    throw new Error(`hardware report of ${hardwareReport.length} bytes does not fit an HCL report`);
  const out = Buffer.alloc(HCL_LAYOUT.runtimeDataOffset + runtime.length);
  out.write('HCLA', 0, 'latin1');
  out.writeUInt32LE(2, 4); // version
  out.writeUInt32LE(out.length - HCL_LAYOUT.reportOffset, 8); // report size
  out.writeUInt32LE(2, 12); // request type
  Buffer.from(hardwareReport).copy(out, HCL_LAYOUT.reportOffset);
  out.writeUInt32LE(20 + runtime.length, 1216); // IGVM request data size
  out.writeUInt32LE(1, 1220); // version
  out.writeUInt32LE(reportType, 1224);
  out.writeUInt32LE(1, 1228); // hash type SHA-256
  out.writeUInt32LE(runtime.length, 1232);
  Buffer.from(runtime).copy(out, HCL_LAYOUT.runtimeDataOffset);
  return out;
}
