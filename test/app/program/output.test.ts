/** One result printer: the JSON envelope of -o json, the text of -o table. */
import { describe, expect, it } from 'vitest';
import { envelope, printResult } from '../../../src/app/program/output.js';

function sink(): { out: NodeJS.WritableStream; lines: string[] } {
  const lines: string[] = [];
  return { out: { write: (c: string) => lines.push(c) } as unknown as NodeJS.WritableStream, lines };
}

describe('printResult', () => {
  it('prints one envelope for -o json and returns the exit code', () => {
    const { out, lines } = sink();
    expect(printResult('json', 'example', 1, { a: 1 }, () => 'text', out)).toBe(1);
    expect(JSON.parse(lines[0] ?? '')).toEqual({
      command: 'example',
      status: 'refused',
      exitCode: 1,
      result: { a: 1 },
    });
  });

  it('prints the text for -o table, ending in one newline', () => {
    const { out, lines } = sink();
    printResult('table', 'example', 0, { a: 1 }, (r) => `a=${r.a}`, out);
    printResult('table', 'example', 0, { a: 2 }, (r) => `a=${r.a}\n`, out);
    expect(lines).toEqual(['a=1\n', 'a=2\n']);
  });

  it.each([
    [0, 'ok'],
    [1, 'refused'],
    [2, 'usage'],
    [3, 'undecided'],
  ] as const)('exit code %d has status %s', (code, status) => {
    expect(envelope('x', code, null).status).toBe(status);
  });
});
