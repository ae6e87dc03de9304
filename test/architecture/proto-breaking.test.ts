/**
 * `npm run proto:check` runs `buf breaking` against the protos as first released
 * (proto/breaking-baseline.binpb): on a temp copy of buf.yaml, proto/ and the baseline, the
 * unmodified protos pass, while renumbering a field or changing its type fails. The real buf binary
 * runs; nothing is mocked.
 */
import { execFile } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useTmpDirs } from '../support/tmp.js';

const ROOT = resolve(import.meta.dirname, '../..');
const tmp = useTmpDirs('confboot-proto-breaking-');

function copy(): string {
  const dir = tmp();
  cpSync(join(ROOT, 'proto'), join(dir, 'proto'), { recursive: true });
  cpSync(join(ROOT, 'buf.yaml'), join(dir, 'buf.yaml'));
  return dir;
}

function check(root: string): Promise<{ code: number; output: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [join(ROOT, 'scripts/proto-check.mjs'), '--root', root, '--only', 'lint,breaking'],
      { timeout: 60_000 },
      (err, stdout, stderr) =>
        done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, output: stdout + stderr }),
    );
  });
}

function edit(root: string, file: string, from: string, to: string): void {
  const p = join(root, 'proto', file);
  const text = readFileSync(p, 'utf8');
  expect(text).toContain(from);
  writeFileSync(p, text.replace(from, to));
}

describe('proto:check runs buf breaking against the first released protos', () => {
  it('passes on the unmodified protos', async () => {
    const r = await check(copy());
    expect(r.output).toMatch(/buf breaking ok against proto\/breaking-baseline\.binpb/);
    expect(r.code).toBe(0);
  });

  it('fails when a field is renumbered (join.proto disk_uuid = 1 → 9)', async () => {
    const root = copy();
    edit(root, 'join.proto', 'string disk_uuid = 1;', 'string disk_uuid = 9;');
    const r = await check(root);
    expect(r.code).toBe(1);
    expect(r.output).toMatch(
      /join\.proto:\d+:\d+:Previously present field "1" with name "disk_uuid" on message "IssueJoinTicketRequest" was deleted/,
    );
    expect(r.output).toMatch(/proto:check: buf breaking failed/);
  });

  it('fails when a field changes its type (bytes state_disk_key → string)', async () => {
    const root = copy();
    edit(root, 'join.proto', 'bytes state_disk_key = 1;', 'string state_disk_key = 1;');
    const r = await check(root);
    expect(r.code).toBe(1);
    expect(r.output).toMatch(/changed type from "bytes" to "string"/);
  });
});
