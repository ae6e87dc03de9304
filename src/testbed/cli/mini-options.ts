/**
 * The flags every `confboot mini` scenario that boots VMs takes (`up`, `lifecycle`, `upgrade`),
 * declared once, and the check of `--accel`.
 */
import { type CommandSpec, UsageError } from '../../app/program/args.js';

type Option = NonNullable<CommandSpec['options']>[string];

/** --accel, --cache-dir and --work-dir. */
export const MINI_VM_OPTIONS = {
  accel: {
    type: 'string',
    valueName: 'A',
    description: 'auto (KVM when a probe boot works, else TCG), kvm or tcg',
    default: 'auto',
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
} satisfies Record<string, Option>;

/** --json of a scenario: the result on stdout, progress on stderr. */
export const MINI_JSON_OPTION: Option = {
  type: 'boolean',
  description: 'print the result as JSON on stdout (progress goes to stderr)',
};

/** The value of --accel; a usage error for anything else. */
export function accelFlag(value: unknown): 'auto' | 'kvm' | 'tcg' {
  const accel = String(value);
  if (accel !== 'auto' && accel !== 'kvm' && accel !== 'tcg')
    throw new UsageError('--accel must be auto, kvm or tcg');
  return accel;
}
