/**
 * The options every `confboot mini` scenario that boots VMs takes (`up`, `lifecycle`, `upgrade`),
 * defined once: `--accel`, `--cache-dir`, `--work-dir` and `-o table|json`, and their exit codes.
 */
import { type CommandSpec, UsageError } from '../../app/program/args.js';
import { oneOf } from '../../app/program/options.js';
import { OUTPUT_OPTION } from '../../app/program/shared-options.js';

/** How QEMU runs the VMs. */
export const ACCELS = ['auto', 'kvm', 'tcg'] as const;

/** --accel, --cache-dir and --work-dir, and -o table|json. */
export const MINI_VM_OPTIONS = {
  accel: {
    type: 'string',
    valueName: 'A',
    description: 'auto (KVM when a probe boot works, else TCG), kvm or tcg',
    default: 'auto',
    parse: oneOf(ACCELS),
  },
  'cache-dir': {
    type: 'string',
    valueName: 'DIR',
    description: 'node image and kernel package cache (default ~/.cache/confboot/mini)',
  },
  'work-dir': {
    type: 'string',
    valueName: 'DIR',
    description: 'where VM logs go (default a new /tmp/confboot-mini-*)',
  },
  output: OUTPUT_OPTION,
} as const;

/** The exit codes of a scenario; `held` says what exit 0 proves. */
export function scenarioExitCodes(held: string): CommandSpec['exitCodes'] {
  return {
    0: held,
    1: 'a step did not hold, or the run failed',
    3: 'stopped by SIGINT/SIGTERM before the scenario decided (everything it started is removed)',
  };
}

/** `parse` for a count from 0 to `max`. */
export function count(max: number): (raw: string, flag: string) => number {
  return (raw, flag) => {
    const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isInteger(n) || n > max)
      throw new UsageError(`--${flag}: want a whole number from 0 to ${max}, got "${raw}"`);
    return n;
  };
}

/** The parsed --accel, --cache-dir and --work-dir as a scenario takes them. */
export function vmOptions(v: {
  accel: (typeof ACCELS)[number];
  'cache-dir': string | undefined;
  'work-dir': string | undefined;
}): { accel: (typeof ACCELS)[number]; cacheDir?: string; workDir?: string } {
  return {
    accel: v.accel,
    ...(v['cache-dir'] === undefined ? {} : { cacheDir: v['cache-dir'] }),
    ...(v['work-dir'] === undefined ? {} : { workDir: v['work-dir'] }),
  };
}
