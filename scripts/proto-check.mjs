#!/usr/bin/env node
// Fails when proto/ and the committed ts-proto output in src/gen disagree, or when buf lint fails.
// Regenerates into a temp dir with the same buf.gen.yaml and compares file by file.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const run = (args) =>
  execFileSync('npx', ['--no-install', 'buf', ...args], { stdio: ['ignore', 'inherit', 'inherit'] });

try {
  run(['lint']);
} catch {
  console.error('proto:check: buf lint failed');
  process.exit(1);
}

const tmp = mkdtempSync(join(tmpdir(), 'confboot-proto-'));
try {
  run(['generate', '-o', tmp]);
  const fresh = join(tmp, 'src/gen');
  const committed = 'src/gen';
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
  console.log(`proto:check: buf lint ok; ${a.length} generated files match proto/`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
