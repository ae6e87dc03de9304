/**
 * Comments and docs stand on their own: no file in the repository cites the project's design papers
 * (REFERENCE, DESIGN.md, PLATFORM.md, STYLE.md), which live outside it. A fact the code relies on is
 * stated where it is used, or written down once in docs/ (upstream behaviour: docs/upstream.md) and
 * pointed to from there.
 *
 * TO_DO names files that may still cite one, one per line (empty now: every file states its facts).
 * The test fails on a listed file that no longer cites one, so the list only shrinks.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const self = relative(root, import.meta.filename);
const scanned = ['src', 'proto', 'scripts', 'test', 'docs', 'deploy', 'README.md'];
const textFile = /\.(ts|mts|mjs|js|proto|md|sh|ya?ml)$/;
/** A paper's name, e.g. "see REFERENCE §4.1", "REFERENCE.md" or "(DESIGN.md)". */
const citation = /\bREFERENCE\b|\b(DESIGN|PLATFORM|STYLE)\.md\b/;

const TO_DO = `
`
  .split('\n')
  .filter((line) => line !== '');

function filesUnder(path: string): string[] {
  const full = join(root, path);
  if (!statSync(full, { throwIfNoEntry: false })) return [];
  if (!statSync(full).isDirectory()) return textFile.test(path) ? [path] : [];
  return readdirSync(full).flatMap((name) => filesUnder(join(path, name)));
}

function citing(): string[] {
  return scanned
    .flatMap(filesUnder)
    .filter((file) => file !== self && citation.test(readFileSync(join(root, file), 'utf8')))
    .sort();
}

describe('no citation of the design papers outside the repository', () => {
  const found = citing();

  it('finds none outside the files still to do', () => {
    expect(found.filter((file) => !TO_DO.includes(file))).toEqual([]);
  });

  it('lists only files that still cite one, so the to-do list shrinks', () => {
    expect(TO_DO.filter((file) => !found.includes(file))).toEqual([]);
  });
});
