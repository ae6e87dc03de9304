/**
 * What a "boot" measures on a demo node. A real confidential VM's firmware and boot loader extend
 * PCRs 4 (boot manager code), 9 (kernel, initrd) and 12 (kernel command line); the demo extends the
 * same PCRs of each node's swtpm with TPM2_PCR_Event over these strings, and a tampered node boots
 * a different command line. The expected values given to the join service are computed by replaying
 * the good boot, the way an operator derives them from a reproducible image build.
 */
import { createHash } from 'node:crypto';
import type { Tpm } from '../../ports/tpm.js';

/** One measured boot event: PCR index and the bytes hashed into it. */
export interface BootEvent {
  pcr: number;
  data: string;
}

/** The events of the demo image's boot, in order. */
export const GOOD_BOOT: readonly BootEvent[] = [
  { pcr: 4, data: 'confboot-demo shim 15.8 + systemd-boot 255 (EFI boot manager code)' },
  { pcr: 9, data: 'confboot-demo vmlinuz-6.6 + initrd (sha256 measured by the boot loader)' },
  { pcr: 12, data: 'console=ttyS0 confboot.csp=qemu confboot.variant=qemu-vtpm ro' },
];

/** A boot with a changed kernel command line (an attacker dropping to a root shell). */
export const TAMPERED_BOOT: readonly BootEvent[] = [
  GOOD_BOOT[0] as BootEvent,
  GOOD_BOOT[1] as BootEvent,
  { pcr: 12, data: 'console=ttyS0 confboot.csp=qemu confboot.variant=qemu-vtpm rw init=/bin/sh' },
];

/** PCRs that must stay zero on a fresh node (QEMU vTPM defaults; PCR 15 = not yet bootstrapped). */
export const ZERO_PCRS = [8, 11, 13, 15] as const;

const sha256 = (...parts: Uint8Array[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return new Uint8Array(h.digest());
};

/** Replays `events` from all-zero PCRs: PCR = SHA256(PCR ‖ SHA256(data)), like TPM2_PCR_Event. */
export function replayBoot(events: readonly BootEvent[]): Map<number, Uint8Array> {
  const pcrs = new Map<number, Uint8Array>();
  for (const e of events) {
    const old = pcrs.get(e.pcr) ?? new Uint8Array(32);
    pcrs.set(e.pcr, sha256(old, sha256(new TextEncoder().encode(e.data))));
  }
  return pcrs;
}

/** Extends the node's TPM with `events`, as its firmware and boot loader would. */
export async function measureBoot(tpm: Tpm, events: readonly BootEvent[]): Promise<void> {
  for (const e of events) await tpm.pcrEvent(e.pcr, new TextEncoder().encode(e.data));
}

/** The attestation config (upstream format) that accepts exactly the good boot. */
export function expectedAttestationConfig(): {
  measurements: Record<string, { expected: string; warnOnly: boolean }>;
} {
  const measurements: Record<string, { expected: string; warnOnly: boolean }> = {};
  for (const [pcr, value] of replayBoot(GOOD_BOOT))
    measurements[String(pcr)] = { expected: Buffer.from(value).toString('hex'), warnOnly: false };
  for (const pcr of ZERO_PCRS) measurements[String(pcr)] = { expected: '00'.repeat(32), warnOnly: false };
  return { measurements };
}
