/** The option-table helper: typed values from one table, aliases, durations, one-line usage errors. */
import { describe, expect, expectTypeOf, it } from 'vitest';
import { renderHelp, UsageError } from '../../../src/app/program/args.js';
import {
  defineCommand,
  duration,
  formatDuration,
  hostPort,
  oneOf,
  parseOptions,
  wholeNumber,
} from '../../../src/app/program/options.js';
import { cloudOption, OUTPUT_OPTION, variantOption } from '../../../src/app/program/shared-options.js';

const spec = defineCommand({
  name: 'example',
  summary: 'An example command.',
  env: true,
  options: {
    cloud: cloudOption({ required: true }),
    variant: variantOption({ required: false, what: 'attestation variant' }),
    grace: {
      type: 'string',
      valueName: 'DURATION',
      default: '30s',
      description: 'grace',
      parse: duration('ms'),
    },
    count: { type: 'string', valueName: 'N', description: 'count', parse: wholeNumber(1) },
    mode: { type: 'string', valueName: 'a|b', default: 'a', description: 'mode', parse: oneOf(['a', 'b']) },
    listen: {
      type: 'string',
      valueName: 'HOST:PORT',
      default: '0.0.0.0:1',
      description: 'l',
      parse: hostPort,
    },
    verbose: { type: 'boolean', description: 'more' },
    tag: { type: 'string', valueName: 'T', multiple: true, description: 'tags' },
    output: OUTPUT_OPTION,
  },
});

const noEnv = { env: {} };

describe('parseOptions', () => {
  it('types each value from its table entry', () => {
    const v = parseOptions(['--cloud=qemu'], spec, undefined, noEnv);
    expectTypeOf(v).toEqualTypeOf<
      | {
          cloud: string;
          variant: import('../../../src/ports/variant.js').Variant | undefined;
          grace: number;
          count: number | undefined;
          mode: 'a' | 'b';
          listen: { host: string; port: number };
          verbose: boolean;
          tag: string[] | undefined;
          output: 'table' | 'json';
        }
      | undefined
    >();
    expect(v).toEqual({
      cloud: 'qemu',
      variant: undefined,
      grace: 30_000,
      count: undefined,
      mode: 'a',
      listen: { host: '0.0.0.0', port: 1 },
      verbose: false,
      tag: undefined,
      output: 'table',
    });
  });

  it('takes upstream names as aliases of --cloud and --variant, and --json for -o json', () => {
    const v = parseOptions(
      ['--csp', 'qemu', '--attestation-variant=qemu-vtpm', '--json'],
      spec,
      undefined,
      noEnv,
    );
    expect(v).toMatchObject({ cloud: 'qemu', variant: 'qemu-vtpm', output: 'json' });
    expect(parseOptions(['--cloud=qemu', '-o', 'json'], spec, undefined, noEnv)?.output).toBe('json');
  });

  it('refuses a flag and its alias together', () => {
    expect(() => parseOptions(['--cloud=qemu', '--csp=gcp'], spec, undefined, noEnv)).toThrow(
      '--csp is another name of --cloud; give one of them',
    );
  });

  it.each([
    [['--cloud=mars'], /^--cloud: want one of .*got "mars"$/],
    [['--cloud=qemu', '--variant=dummy'], /dummy is for tests only/],
    [['--cloud=qemu', '--count=0'], /^--count: want a whole number ≥ 1, got "0"/],
    [['--cloud=qemu', '--mode=c'], /^--mode: want one of a, b, got "c"/],
    [['--cloud=qemu', '--grace=soon'], /^--grace: want a duration such as 30s/],
    [['--cloud=qemu', '--listen=nope'], /^--listen: want HOST:PORT/],
    [['--cloud=qemu', '--nope'], /^Unknown option '--nope'.*; see confboot example --help$/],
    [[], /^missing required option --cloud \(or CONFBOOT_CLOUD\); see confboot example --help$/],
  ])('usage error on one line: %j', (argv, message) => {
    let err: unknown;
    try {
      parseOptions(argv, spec, undefined, noEnv);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).not.toContain('\n');
  });

  it('parses values from the environment through the same parse', () => {
    const v = parseOptions([], spec, undefined, { env: { CONFBOOT_CLOUD: 'qemu', CONFBOOT_GRACE: '2m' } });
    expect(v).toMatchObject({ cloud: 'qemu', grace: 120_000 });
  });

  it('lists aliases, the short flag and the exit codes in --help', () => {
    const help = renderHelp(spec);
    expect(help).toMatch(/--cloud C +cloud provider: .*\(also --csp\)/);
    expect(help).toContain('-o, --output table|json');
    expect(help).toContain('(also --json = --output json)');
    expect(help).toContain('Exit codes: 0 ok, 1 refused or failed, 2 usage error, 3 could not decide.');
  });
});

describe('duration', () => {
  it.each([
    ['30s', 30_000],
    ['24h', 86_400_000],
    ['1h30m', 5_400_000],
    ['250ms', 250],
    ['90d', 90 * 86_400_000],
    ['15', 15],
  ])('%s is %d ms', (raw, ms) => {
    expect(duration('ms')(raw, 'd')).toBe(ms);
  });

  it('reads a bare number in the flag’s former unit', () => {
    expect(duration('h')('24', 'warn')).toBe(86_400_000);
  });

  it('refuses less than its minimum', () => {
    expect(() => duration('ms', 1)('0s', 'd')).toThrow('--d: want a duration of at least 1ms, got "0s"');
  });

  it.each([
    [30_000, '30s'],
    [86_400_000, '1d'],
    [1500, '1500ms'],
  ])('formats %d ms as %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
    expect(duration('ms')(text, 'd')).toBe(ms);
  });
});
