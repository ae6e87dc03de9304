#!/usr/bin/env node
// proto:check. Fails when
//   lint      buf lint fails;
//   breaking  proto/ is not compatible with the protos as first released: `buf breaking` (rules in
//             buf.yaml) against the stored image proto/breaking-baseline.binpb, so field numbers,
//             types and names of the upstream wire contracts stay frozen. A stored image works in a
//             shallow CI clone, where the first commit is not available;
//   generate  the committed ts-proto output in src/gen differs from what proto/ generates (regenerated
//             into a temp dir with the same buf.gen.yaml, compared file by file).
// Usage: node scripts/proto-check.mjs [--root DIR] [--only lint,breaking,generate]
// --root runs the checks on another checkout (tests use a temp copy); buf comes from this repo.
// The baseline was made with `buf build --exclude-source-info -o proto/breaking-baseline.binpb` from
// the proto/ and buf.yaml of the first commit that had proto/ (778af36). Replace it only for a
// deliberate, documented break of the wire contract.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const STEPS = ['lint', 'breaking', 'generate'];
const BASELINE = 'proto/breaking-baseline.binpb';

const { values } = parseArgs({
  options: { root: { type: 'string' }, only: { type: 'string' }, help: { type: 'boolean' } },
});
if (values.help) {
  console.log('Usage: node scripts/proto-check.mjs [--root DIR] [--only lint,breaking,generate]');
  process.exit(0);
}
const root = resolve(values.root ?? '.');
const steps = values.only ? values.only.split(',') : STEPS;
const unknown = steps.filter((s) => !STEPS.includes(s));
if (unknown.length > 0) {
  console.error(`proto:check: unknown step ${unknown.join(', ')}; steps are ${STEPS.join(', ')}`);
  process.exit(2);
}

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const bin = join(repo, 'node_modules/.bin');
// The ts-proto plugin (buf.gen.yaml: local protoc-gen-ts_proto) is found on PATH.
const env = { ...process.env, PATH: `${bin}${delimiter}${process.env.PATH ?? ''}` };
const run = (args) =>
  execFileSync(join(bin, 'buf'), args, { cwd: root, env, stdio: ['ignore', 'inherit', 'inherit'] });
const done = [];

if (steps.includes('lint')) {
  try {
    run(['lint']);
  } catch {
    console.error('proto:check: buf lint failed');
    process.exit(1);
  }
  done.push('buf lint ok');
}

if (steps.includes('breaking')) {
  if (!existsSync(join(root, BASELINE))) {
    console.error(`proto:check: ${BASELINE} is missing; buf breaking needs the first released protos`);
    process.exit(1);
  }
  try {
    run(['breaking', '--against', BASELINE]);
  } catch {
    console.error(
      `proto:check: buf breaking failed: proto/ breaks the wire contract of the first release (${BASELINE}); ` +
        'field numbers, types and names of the upstream messages are frozen',
    );
    process.exit(1);
  }
  done.push(`buf breaking ok against ${BASELINE}`);
}

if (steps.includes('generate')) {
  const tmp = mkdtempSync(join(tmpdir(), 'confboot-proto-'));
  try {
    run(['generate', '-o', tmp]);
    const fresh = join(tmp, 'src/gen');
    const committed = join(root, 'src/gen');
    const a = readdirSync(fresh).sort();
    const b = readdirSync(committed).sort();
    const problems = [];
    for (const f of new Set([...a, ...b])) {
      if (!a.includes(f)) problems.push(`${f}: committed but not generated from proto/`);
      else if (!b.includes(f)) problems.push(`${f}: generated from proto/ but not committed`);
      else if (readFileSync(join(fresh, f), 'utf8') !== readFileSync(join(committed, f), 'utf8'))
        problems.push(`${f}: differs from what proto/ generates`);
    }
    if (problems.length > 0) {
      console.error(`proto:check: src/gen is stale; run "npm run proto:gen"\n  ${problems.join('\n  ')}`);
      process.exit(1);
    }
    done.push(`${a.length} generated files match proto/`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}

console.log(`proto:check: ${done.join('; ')}`);
