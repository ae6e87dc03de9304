/**
 * Expected measurements of a mini node, and where each comes from:
 * - PCR 4 and PCR 9 are computed from the boot components (kernel, initramfs, command line, guest
 *   memory size): OVMF measures the kernel (Authenticode, after QEMU's setup-header patches), then
 *   the event "Calling EFI Application from Boot Option" and the separator into PCR 4; the kernel's
 *   EFI stub measures the load options and the initramfs into PCR 9.
 * - PCRs 0–3 and 5–7 (firmware code, firmware configuration, option ROMs, EFI variables, exit boot
 *   services) depend on OVMF and QEMU's machine and are taken from a reference boot's event log.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { replayEventLog, type TcgEventLog } from '../../adapters/attestation/eventlog/tcg-log.js';
import { extend, kernelMeasurement, loadOptionsMeasurement } from '../vm/linux-boot.js';

const SHA256 = 11;
const sha256 = (b: Uint8Array | string) => createHash('sha256').update(b).digest();

/** PCRs computed from the image. */
export const COMPUTED_PCRS = [4, 9] as const;
/** PCRs taken from a reference boot's event log. */
export const REFERENCE_PCRS = [0, 1, 2, 3, 5, 6, 7] as const;

/** Expected PCR 4 and 9 for booting `kernel` + `initrd` with `cmdline` and `memoryMiB` of RAM. */
export async function computedPcrs(
  kernelPath: string,
  initrdPath: string,
  cmdline: string,
  memoryMiB: number,
): Promise<Map<number, Buffer>> {
  const kernel = await readFile(kernelPath);
  const initrd = await readFile(initrdPath);
  const zero = Buffer.alloc(32);
  let pcr4 = extend(zero, kernelMeasurement(kernel, initrd.length, memoryMiB));
  pcr4 = extend(pcr4, sha256('Calling EFI Application from Boot Option'));
  pcr4 = extend(pcr4, sha256(Buffer.alloc(4)));
  const pcr9 = extend(extend(zero, loadOptionsMeasurement(cmdline)), sha256(initrd));
  return new Map([
    [4, pcr4],
    [9, pcr9],
  ]);
}

/** The SHA-256 replay of `log` for the reference PCRs. */
export function referencePcrs(log: TcgEventLog): Map<number, Buffer> {
  const bank = replayEventLog(log).get(SHA256);
  if (bank === undefined) throw new Error('reference event log has no SHA-256 bank');
  const out = new Map<number, Buffer>();
  for (const p of REFERENCE_PCRS) {
    const v = bank.get(p);
    if (v === undefined) throw new Error(`reference event log has no events for PCR ${p}`);
    out.set(p, Buffer.from(v));
  }
  return out;
}
