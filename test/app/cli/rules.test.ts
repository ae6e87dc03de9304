/**
 * The CLI rules, read from every command's option table (CommandModule.commandSpecs): one flag per
 * concept (`--cloud`, `--variant`; upstream's names only as aliases), shared options from their one
 * definition, durations written with units, `-o table|json` on every command that prints a result,
 * the common exit codes in --help, and defaults that their own parser accepts. Planted violations
 * show each rule can fail.
 */
import { describe, expect, it } from 'vitest';
import { loadCommandModules } from '../../../src/app/cli/cli-docs.js';
import type { CommandSpec } from '../../../src/app/program/args.js';
import {
  LOG_LEVEL_OPTION,
  OUTPUT_OPTION,
  parseCloud,
  parseVariant,
} from '../../../src/app/program/shared-options.js';

/** Names that only ever appear as aliases, with the option that owns the concept. */
const ALIAS_ONLY: Record<string, string> = { csp: 'cloud', 'attestation-variant': 'variant', json: 'output' };

/** Value names of a duration written as a bare number of some unit. */
const BARE_UNIT_VALUE_NAMES = /^(MS|SECONDS?|S|MINUTES?|HOURS?|H|DAYS?|D)$/;

/** Every broken rule of `spec`, one line each. */
function ruleViolations(spec: CommandSpec): string[] {
  const out: string[] = [];
  const at = (flag: string, what: string) => out.push(`${spec.name} --${flag}: ${what}`);
  const names = new Set(Object.keys(spec.options));
  for (const [flag, o] of Object.entries(spec.options)) {
    if (!/^[a-z][a-z0-9]*(-[a-z0-9]+)*$/.test(flag)) at(flag, 'not kebab-case');
    if (o.description.trim() === '') at(flag, 'no description');
    if (o.type === 'string' && !o.valueName) at(flag, 'no value name');
    if (Object.hasOwn(ALIAS_ONLY, flag)) at(flag, `is an alias of --${ALIAS_ONLY[flag]}, not an option`);
    if (o.valueName && BARE_UNIT_VALUE_NAMES.test(o.valueName)) at(flag, 'a duration takes units (DURATION)');
    if (flag === 'cloud' && o.parse !== parseCloud) at(flag, 'not the shared cloud option');
    if (flag === 'variant' && o.parse !== parseVariant) at(flag, 'not the shared variant option');
    if (flag === 'log-level' && o.parse !== LOG_LEVEL_OPTION.parse)
      at(flag, 'not the shared log-level option');
    if (flag === 'output' && o !== OUTPUT_OPTION) at(flag, 'not the shared output option');
    if (typeof o.default === 'string' && o.parse)
      try {
        o.parse(o.default, flag);
      } catch {
        at(flag, `its parser refuses its default ${JSON.stringify(o.default)}`);
      }
    for (const a of o.aliases ?? []) {
      const alias = typeof a === 'string' ? a : a.flag;
      if (names.has(alias)) at(flag, `alias --${alias} is also an option`);
    }
  }
  if (spec.kind !== 'service' && spec.options.output !== OUTPUT_OPTION)
    out.push(`${spec.name}: prints a result but takes no -o table|json`);
  if (spec.epilog && /exit code/i.test(spec.epilog))
    out.push(`${spec.name}: exit codes belong in exitCodes (the common footer), not the epilog`);
  return out;
}

const modules = await loadCommandModules();

describe('CLI rules', () => {
  it.each(modules.map((m) => [m.name, m.specs] as const))(
    'confboot %s: every table keeps the rules',
    (_name, specs) => {
      expect(specs.length).toBeGreaterThan(0);
      expect(specs.flatMap(ruleViolations)).toEqual([]);
    },
  );

  it.each([
    [
      '--csp as an option',
      { csp: { type: 'string', valueName: 'C', description: 'cloud' } },
      /is an alias of --cloud/,
    ],
    ['a bare-ms duration', { grace: { type: 'string', valueName: 'MS', description: 'g' } }, /takes units/],
    [
      'a cloud option of its own',
      { cloud: { type: 'string', valueName: 'C', description: 'c' } },
      /shared cloud/,
    ],
    ['no value name', { file: { type: 'string', description: 'f' } }, /no value name/],
    ['an undescribed flag', { Bad_Flag: { type: 'boolean', description: '' } }, /not kebab-case/],
  ] as const)('fails on a planted violation: %s', (_name, options, message) => {
    const spec: CommandSpec = {
      name: 'planted',
      summary: 's',
      options: { ...options, output: OUTPUT_OPTION },
    };
    expect(ruleViolations(spec).join('\n')).toMatch(message);
  });

  it('fails on a printing command without -o and on exit codes in the epilog', () => {
    const spec: CommandSpec = { name: 'planted', summary: 's', options: {}, epilog: 'Exit codes: 0 fine.' };
    expect(ruleViolations(spec)).toEqual([
      'planted: prints a result but takes no -o table|json',
      'planted: exit codes belong in exitCodes (the common footer), not the epilog',
    ]);
    expect(ruleViolations({ ...spec, kind: 'service', epilog: undefined })).toEqual([]);
  });
});
