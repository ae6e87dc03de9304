/**
 * What an attestation config must enforce before the join service or `confboot init` trusts it.
 * Counting enforced entries is not enough: a config that enforces only the node-lock register, or
 * only registers that hold their reset value on every machine, accepts a node whatever it booted.
 * So a config must enforce (1) at least one register of the variant's boot chain (firmware, boot
 * loader, kernel, command line) at a value other than its reset value, and (2) the node-lock
 * register as all zero — the register a node extends with the cluster ID once it has joined or been
 * initialised, so a node that once joined another (possibly rogue) cluster is refused until reboot.
 * Each variant names its registers in its registry entry; this module only checks.
 */
import type { Measurements } from '../ports/types.js';

/** How a variant's measurement indices are named: vTPM PCRs, or TDX MRTD (0) and RTMR0–3 (1–4). */
export type RegisterNaming = 'pcr' | 'tdx';

/** The registers of a variant that make a policy mean something. */
export interface MeasurementRegisters {
  /** Indices (in the measurements map) that measure the boot chain of the node's image. */
  readonly bootChain: readonly number[];
  /** Index of the node-lock register, expected all zero before a node joins. */
  readonly nodeLock: number;
  /** How the indices are named in messages. */
  readonly naming: RegisterNaming;
}

/** One rule a measurements map breaks. */
export interface MeasurementPolicyWeakness {
  /** `boot-chain` (no boot-chain register enforced at a non-reset value) or `node-lock`. */
  rule: 'boot-chain' | 'node-lock';
  /** What is wrong and what would fix it, naming the registers. */
  message: string;
}

/** The name of measurement `index` under `naming`: `PCR 12`, `MRTD`, `RTMR 2`. */
export function registerName(index: number, naming: RegisterNaming): string {
  if (naming === 'tdx') return index === 0 ? 'MRTD' : `RTMR ${index - 1}`;
  return `PCR ${index}`;
}

/** Whether `value` is a reset value (all zero or all ones), which a register holds on any machine. */
export function isResetValue(value: Uint8Array): boolean {
  return value.every((b) => b === 0) || value.every((b) => b === 0xff);
}

/**
 * Returns every rule `measurements` breaks for a variant with `registers`, in a fixed order
 * (boot chain, then node lock); empty when the map is strong enough.
 */
export function measurementPolicyWeaknesses(
  measurements: Measurements,
  registers: MeasurementRegisters,
): MeasurementPolicyWeakness[] {
  const name = (i: number) => registerName(i, registers.naming);
  const out: MeasurementPolicyWeakness[] = [];
  const proving = registers.bootChain.filter((i) => {
    const m = measurements.get(i);
    return m !== undefined && !m.warnOnly && !isResetValue(m.expected);
  });
  if (proving.length === 0)
    out.push({
      rule: 'boot-chain',
      message: `it enforces no boot-chain register at a measured value (want at least one of ${registers.bootChain.map(name).join(', ')} enforced with a value other than all zero), so it accepts any image`,
    });
  const lock = measurements.get(registers.nodeLock);
  const lockName = name(registers.nodeLock);
  if (lock === undefined || lock.warnOnly || !lock.expected.every((b) => b === 0))
    out.push({
      rule: 'node-lock',
      message: `it does not enforce the node-lock register ${lockName} as all zero (${
        lock === undefined ? 'absent' : lock.warnOnly ? 'warnOnly' : 'expected value not zero'
      }), so a node that already joined a cluster passes`,
    });
  return out;
}
