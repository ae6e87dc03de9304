/**
 * Commands made of verbs: without a verb the usage goes to stdout with exit 2, `--help`/`-h` print
 * it with exit 0, an unknown verb is a usage error naming it on stderr, and a known verb runs with
 * the rest of the arguments, its exit code passed on.
 */
import { describe, expect, it } from 'vitest';
import { runVerb, type Verb } from '../../../src/app/cli/verbs.js';
import { captureStdio } from '../../support/stdio.js';

const calls: string[][] = [];
/** A verb that records its arguments and exits with `code`. */
function recording(name: string, summary: string, code: number): Verb {
  return {
    summary,
    run: async (argv) => {
      calls.push([name, ...argv]);
      return code;
    },
  };
}
const VERBS: Record<string, Verb> = {
  show: recording('show', 'show a thing', 0),
  'remove-all': recording('remove-all', 'remove every thing', 1),
};
const USAGE = [
  'Usage: confboot things <verb> [options]',
  '',
  'Verbs:',
  '  show        show a thing',
  '  remove-all  remove every thing',
  '',
  'Run `confboot things <verb> --help` for its options.',
  'Exit codes: 0 ok.',
  '',
].join('\n');

describe('runVerb', () => {
  const stdio = captureStdio();

  it.each([
    [[], 2],
    [['--help'], 0],
    [['-h'], 0],
  ])('prints the usage for %j with exit %i', async (argv, code) => {
    expect(await runVerb('things', VERBS, argv, ['Exit codes: 0 ok.'])).toBe(code);
    expect(stdio.stdout()).toBe(USAGE);
  });

  it('refuses an unknown verb, and an inherited property name, with the usage on stderr', async () => {
    expect(await runVerb('things', VERBS, ['explode'], ['Exit codes: 0 ok.'])).toBe(2);
    expect(stdio.stderr()).toBe(`confboot things: unknown verb "explode"\n\n${USAGE}`);
    expect(await runVerb('things', VERBS, ['toString'])).toBe(2);
    expect(stdio.stdout()).toBe('');
  });

  it('runs a verb with the remaining arguments and passes its exit code on', async () => {
    calls.length = 0;
    expect(await runVerb('things', VERBS, ['show', '--id', '7'])).toBe(0);
    expect(await runVerb('things', VERBS, ['remove-all'])).toBe(1);
    expect(calls).toEqual([['show', '--id', '7'], ['remove-all']]);
  });
});
