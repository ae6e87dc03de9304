/** The options every mini scenario shares: their parsers and what a scenario receives. */
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../../src/app/program/args.js';
import { OUTPUT_OPTION } from '../../../src/app/program/shared-options.js';
import {
  count,
  MINI_VM_OPTIONS,
  scenarioExitCodes,
  vmOptions,
} from '../../../src/testbed/cli/mini-options.js';

describe('the mini scenario options', () => {
  it('--accel takes auto, kvm or tcg, and refuses anything else in one line naming the flag', () => {
    expect(MINI_VM_OPTIONS.accel.parse('kvm', 'accel')).toBe('kvm');
    expect(() => MINI_VM_OPTIONS.accel.parse('hvf', 'accel')).toThrow(
      '--accel: want one of auto, kvm, tcg, got "hvf"',
    );
  });

  it('takes the shared -o table|json', () => {
    expect(MINI_VM_OPTIONS.output).toBe(OUTPUT_OPTION);
  });

  it.each([
    ['0', 0],
    ['20', 20],
  ])('count(20) reads %s', (raw, n) => {
    expect(count(20)(raw, 'workers')).toBe(n);
  });

  it.each(['21', '-1', '1.5', 'two', ''])('count(20) refuses %j with a usage error', (raw) => {
    expect(() => count(20)(raw, 'workers')).toThrow(UsageError);
    expect(() => count(20)(raw, 'workers')).toThrow(/^--workers: want a whole number from 0 to 20/);
  });

  it('hands a scenario only the directories that were given', () => {
    expect(vmOptions({ accel: 'tcg', 'cache-dir': undefined, 'work-dir': '/w' })).toEqual({
      accel: 'tcg',
      workDir: '/w',
    });
  });

  it('says what exit 0 proves, and that 3 is a run stopped before it decided', () => {
    const codes = scenarioExitCodes('every step held');
    expect(codes?.[0]).toBe('every step held');
    expect(codes?.[3]).toMatch(/stopped by SIGINT\/SIGTERM/);
  });
});
