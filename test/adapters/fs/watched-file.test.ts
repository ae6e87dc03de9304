/**
 * WatchedFile with real files in temp dirs: the labels in its errors and logs, unchanged and invalid
 * updates (the last good value stays, a failed content is parsed once), bytes versus text
 * comparison, and a ConfigMap-style `..data` symlink swap seen through the directory watch (wait
 * bounded to 5 s). The directory watch may add reloads of its own after each write, so outcomes
 * are looked up, not taken from the end. Its two users (UpdatableValidator, FileDenyList) have their own tests.
 */
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FILE_BYTES,
  FILE_UTF8_TEXT,
  type FileContent,
  WatchedFile,
  type WatchedFileReloadOutcome,
} from '../../../src/adapters/fs/watched-file.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-watched-');
const LABELS = { subject: 'sample file', kept: 'sample', parseStart: 'parsing', parseUpdate: 'refreshing' };

function recordingLogger() {
  const lines: Array<{ level: string; msg: string; fields: Record<string, unknown> | undefined }> = [];
  const at =
    (level: string) =>
    (msg: string, fields?: Record<string, unknown>): void => {
      lines.push({ level, msg, fields });
    };
  const l = {
    lines,
    debug: at('debug'),
    info: at('info'),
    warn: at('warn'),
    error: at('error'),
    child: () => l,
  };
  return l;
}

/** Parses "n=<integer>" text; counts its calls. */
function counter() {
  const calls: string[] = [];
  const parse = (text: string): number => {
    calls.push(text);
    const m = /^n=(\d+)$/.exec(text.trim());
    if (!m) throw new Error('expected n=<integer>');
    return Number(m[1]);
  };
  return { calls, parse };
}

const opened: Array<WatchedFile<unknown, unknown>> = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((f) => f.close()));
});

async function start<C>(path: string, content: FileContent<C>, parse: (c: C) => number) {
  const log = recordingLogger();
  const outcomes: Array<{ outcome: WatchedFileReloadOutcome; current: number }> = [];
  const file = await WatchedFile.start<number, C>({
    path,
    content,
    parse,
    logger: log,
    labels: LABELS,
    logFields: (n) => ({ n }),
    onReload: (outcome, current) => outcomes.push({ outcome, current }),
  });
  opened.push(file as WatchedFile<unknown, unknown>);
  return { file, log, outcomes };
}

describe('WatchedFile', () => {
  it('refuses to start on a missing or invalid file, naming the operation from its labels', async () => {
    const dir = tmp();
    const missing = join(dir, 'missing');
    await expect(start(missing, FILE_UTF8_TEXT, counter().parse)).rejects.toMatchObject({
      code: 'failed-precondition',
      message: expect.stringMatching(new RegExp(`^loading sample file ${missing}: `)),
    });
    const bad = join(dir, 'bad');
    writeFileSync(bad, 'nonsense');
    await expect(start(bad, FILE_UTF8_TEXT, counter().parse)).rejects.toMatchObject({
      code: 'failed-precondition',
      message: `parsing sample file ${bad}: expected n=<integer>`,
    });
  });

  it('keeps the last good value on an invalid update, parses a failed content once, and reports each reload', async () => {
    const path = join(tmp(), 'value');
    writeFileSync(path, 'n=1');
    const c = counter();
    const { file, log, outcomes } = await start(path, FILE_UTF8_TEXT, c.parse);
    expect(file.current).toBe(1);
    expect(log.lines).toContainEqual({ level: 'info', msg: 'Sample file loaded', fields: { path, n: 1 } });

    await file.reload();
    expect(outcomes.at(-1)).toEqual({ outcome: { ok: true, changed: false }, current: 1 });

    writeFileSync(path, 'n=oops');
    await file.reload();
    await file.reload();
    expect(file.current).toBe(1);
    expect(c.calls.filter((t) => t === 'n=oops')).toHaveLength(1);
    const invalid = log.lines.filter((l) => l.level === 'error');
    expect(invalid.map((l) => l.msg)).toEqual(['Invalid sample file; keeping the last good sample']);
    expect(invalid[0]?.fields?.error).toBe(`refreshing sample file ${path}: expected n=<integer>`);

    writeFileSync(path, 'n=2');
    await file.reload();
    expect(file.current).toBe(2);
    expect(outcomes).toContainEqual({ outcome: { ok: true, changed: true }, current: 2 });
    expect(log.lines).toContainEqual({ level: 'info', msg: 'Sample file updated', fields: { path, n: 2 } });
  });

  it('keeps serving when the file disappears, with a warning naming the read', async () => {
    const dir = tmp();
    const path = join(dir, 'value');
    writeFileSync(path, 'n=3');
    const { file, log } = await start(path, FILE_UTF8_TEXT, counter().parse);
    renameSync(path, join(dir, 'elsewhere'));
    await file.reload();
    expect(file.current).toBe(3);
    const warn = log.lines.find((l) => l.level === 'warn');
    expect(warn?.msg).toBe('Sample file unreadable; keeping the current sample');
    expect(String(warn?.fields?.error)).toMatch(new RegExp(`^reading sample file ${path}: `));
  });

  it('compares bytes with FILE_BYTES and decoded text with FILE_UTF8_TEXT', async () => {
    // 0xff and 0xfe are both invalid UTF-8 and decode to the same replacement character.
    const textPath = join(tmp(), 'text');
    writeFileSync(textPath, Buffer.from([0xff]));
    const text = await start(textPath, FILE_UTF8_TEXT, (t) => t.length);
    writeFileSync(textPath, Buffer.from([0xfe]));
    await text.file.reload();
    expect(text.outcomes.map((o) => o.outcome)).not.toContainEqual({ ok: true, changed: true });
    expect(text.outcomes.at(-1)?.outcome).toEqual({ ok: true, changed: false });

    const bytesPath = join(tmp(), 'bytes');
    writeFileSync(bytesPath, Buffer.from([0xff]));
    const bytes = await start(bytesPath, FILE_BYTES, (b) => b[0] ?? -1);
    writeFileSync(bytesPath, Buffer.from([0xfe]));
    await bytes.file.reload();
    expect(bytes.outcomes).toContainEqual({ outcome: { ok: true, changed: true }, current: 0xfe });
  });

  it('follows a ConfigMap-style ..data symlink swap through the directory watch', async () => {
    const dir = tmp();
    mkdirSync(join(dir, 'v1'));
    writeFileSync(join(dir, 'v1', 'value'), 'n=1');
    symlinkSync('v1', join(dir, '..data'));
    symlinkSync(join('..data', 'value'), join(dir, 'value'));
    const { file } = await start(join(dir, 'value'), FILE_UTF8_TEXT, counter().parse);
    expect(file.current).toBe(1);

    mkdirSync(join(dir, 'v2'));
    writeFileSync(join(dir, 'v2', 'value'), 'n=2');
    symlinkSync('v2', join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
    const deadline = Date.now() + 5000;
    while (file.current !== 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(file.current).toBe(2);
  });
});
