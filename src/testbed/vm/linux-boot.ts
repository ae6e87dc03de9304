/**
 * What UEFI firmware (OVMF) measures when QEMU boots a Linux kernel with `-kernel/-initrd/-append`,
 * computed from the boot components alone:
 *
 * - PCR 4, EV_EFI_BOOT_SERVICES_APPLICATION: the Authenticode digest of the kernel image as QEMU
 *   hands it to the firmware. QEMU (x86_load_linux) patches the setup header first: loader type
 *   0xb0, CAN_USE_HEAP with the heap end, the command-line address 0x20000, and the initrd's address
 *   and size. The initrd address depends on the guest's memory below 4 GiB, so it is an input.
 * - PCR 9, EV_EVENT_TAG "LOADED_IMAGE::LoadOptions" (the kernel's EFI stub): SHA-256 of the load
 *   options as UTF-16LE with the terminating NUL; OVMF appends " initrd=initrd" to `-append`.
 * - PCR 9, EV_EVENT_TAG "Linux initrd" (the EFI stub): SHA-256 of the initrd file.
 */
import { createHash } from 'node:crypto';
import { authenticodeDigest } from './pe-authenticode.js';

/** QEMU's real-mode and command-line load addresses for boot protocol ≥ 2.02. */
const REAL_ADDR = 0x10000;
const CMDLINE_ADDR = 0x20000;
/** QEMU's pc machine reserves this much below 4 GiB for ACPI tables (ACPI_DATA_SIZE + 32 KiB). */
const ACPI_DATA_SIZE = 0x20000 + 0x8000;

/** The kernel image with the setup-header fields QEMU patches for `-kernel` set as QEMU sets them. */
export function qemuPatchedKernel(kernel: Uint8Array, initrdSize: number, belowFourGiBBytes: number): Buffer {
  const k = Buffer.from(kernel);
  if (k.length < 0x240 || k.readUInt32LE(0x202) !== 0x53726448)
    throw new Error('kernel: no HdrS setup header');
  const protocol = k.readUInt16LE(0x206);
  if (protocol < 0x20c) throw new Error(`kernel: boot protocol ${protocol.toString(16)} is older than 2.12`);
  k.writeUInt32LE(CMDLINE_ADDR, 0x228);
  k[0x210] = 0xb0;
  k[0x211] = (k[0x211] as number) | 0x80;
  k.writeUInt16LE(CMDLINE_ADDR - REAL_ADDR - 0x200, 0x224);
  let initrdMax = k.readUInt16LE(0x236) & 0x2 ? 0xffffffff : k.readUInt32LE(0x22c);
  const limit = belowFourGiBBytes - ACPI_DATA_SIZE;
  if (initrdMax >= limit) initrdMax = limit - 1;
  k.writeUInt32LE(Math.floor((initrdMax - initrdSize) / 4096) * 4096, 0x218);
  k.writeUInt32LE(initrdSize, 0x21c);
  return k;
}

/**
 * The PCR 4 digest of the kernel as OVMF measures it after QEMU's patches, for a `pc` machine with
 * `memoryMiB` of RAM (at most 3 GiB, all of it below 4 GiB).
 */
export function kernelMeasurement(kernel: Uint8Array, initrdSize: number, memoryMiB: number): Buffer {
  if (!Number.isInteger(memoryMiB) || memoryMiB < 128 || memoryMiB > 3072)
    throw new Error(`kernel measurement: memory ${memoryMiB} MiB is not in 128–3072`);
  return authenticodeDigest(qemuPatchedKernel(kernel, initrdSize, memoryMiB * 1024 * 1024));
}

/** The load options OVMF passes to the kernel for `-append cmdline` with an initrd. */
export function loadOptions(cmdline: string): string {
  return `${cmdline} initrd=initrd`;
}

/** The PCR 9 digest of the load options as the EFI stub measures them. */
export function loadOptionsMeasurement(cmdline: string): Buffer {
  return createHash('sha256')
    .update(Buffer.from(`${loadOptions(cmdline)}\0`, 'utf16le'))
    .digest();
}

/** SHA-256 extend: H(pcr ‖ digest). */
export function extend(pcr: Uint8Array, digest: Uint8Array): Buffer {
  return createHash('sha256').update(pcr).update(digest).digest();
}
