/**
 * WatchedFile with real files in temp dirs: the labels in its errors and logs, unchanged and invalid
 * updates (the last good value stays, a failed content is parsed once), bytes versus text
 * comparison, and a ConfigMap-style `..data` symlink swap seen through the directory watch (wait
 * bounded to 5 s). The directory watch may add reloads of its own after each write, so outcomes
 * are looked up, not taken from the end. Its two users (UpdatableValidator, FileDenyList) have their own tests.
 */
import {
  appendFileSync,
  chmodSync,
  mkdirSync,
  renameSync,
  rmdirSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  FILE_BYTES,
  FILE_UTF8_TEXT,
  type FileContent,
  WatchedFile,
  type WatchedFileReloadOutcome,
} from '../../../src/adapters/fs/watched-file.js';
import { FakeClock } from '../../fakes/fake-clock.js';
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

async function start<C>(
  path: string,
  content: FileContent<C>,
  parse: (c: C) => number,
  extra: { clock?: FakeClock; logger?: ReturnType<typeof recordingLogger> } = {},
) {
  const log = extra.logger ?? recordingLogger();
  const outcomes: Array<{ outcome: WatchedFileReloadOutcome; current: number }> = [];
  const file = await WatchedFile.start<number, C>({
    path,
    content,
    parse,
    logger: log,
    labels: LABELS,
    logFields: (n) => ({ n }),
    onReload: (outcome, current) => outcomes.push({ outcome, current }),
    ...(extra.clock ? { clock: extra.clock } : {}),
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

  it('a log file written continuously in the watched directory after the file was deleted causes one reload, not a storm (fake clock)', async () => {
    const dir = tmp();
    const path = join(dir, 'value');
    const logPath = join(dir, 'service.log');
    writeFileSync(path, 'n=1');
    // The service's own log lives in the watched directory: every line it logs is a directory event.
    const log = recordingLogger();
    const toFile =
      (level: 'debug' | 'info' | 'warn' | 'error') =>
      (msg: string, fields?: Record<string, unknown>): void => {
        log.lines.push({ level, msg, fields });
        appendFileSync(logPath, `${JSON.stringify({ level, msg, ...fields })}\n`);
      };
    const fileLogger = {
      ...log,
      debug: toFile('debug'),
      info: toFile('info'),
      warn: toFile('warn'),
      error: toFile('error'),
    };
    const clock = new FakeClock();
    const { file, outcomes } = await start(path, FILE_UTF8_TEXT, counter().parse, {
      clock,
      logger: fileLogger,
    });

    unlinkSync(path);
    await until(() => file.events.own >= 1, 'the deletion event');
    for (let round = 0; round < 40; round++) {
      const seen = file.events.ignored;
      for (let i = 0; i < 25; i++) appendFileSync(logPath, `{"msg":"request ${round}/${i}"}\n`);
      await until(() => file.events.ignored > seen, 'log file events');
      await clock.advance(1_000);
      await until(() => outcomes.length === file.events.reloads, 'the reload to finish');
    }
    // 1,000 log writes (plus the reload's own warning) were seen and ignored; the deletion caused
    // exactly one reload, which failed and kept the last good value.
    expect(file.events.ignored).toBeGreaterThanOrEqual(40);
    expect(file.events.reloads).toBe(1);
    expect(outcomes.map((o) => o.outcome.ok)).toEqual([false]);
    expect(file.current).toBe(1);
    expect(log.lines.filter((l) => l.level === 'warn')).toHaveLength(1);
  });

  it('backs off while reloads keep failing (settle, then 500, 1000, 2000 … ms) and settles quickly again after a success (fake clock)', async () => {
    const dir = tmp();
    const path = join(dir, 'value');
    writeFileSync(path, 'n=1');
    const clock = new FakeClock();
    const { file, outcomes, log } = await start(path, FILE_UTF8_TEXT, counter().parse, { clock });
    // The path becomes a directory: every read fails (EISDIR); chmod makes an event for its name.
    unlinkSync(path);
    mkdirSync(path);
    await until(() => file.events.own >= 1, 'the replacement events');
    const ROUNDS = 40;
    for (let round = 0; round < ROUNDS; round++) {
      const seen = file.events.own;
      chmodSync(path, round % 2 === 0 ? 0o700 : 0o755);
      await until(() => file.events.own > seen, 'the chmod event');
      await clock.advance(1_000);
      await until(() => outcomes.length === file.events.reloads, 'the reload to finish');
    }
    // One event per fake second for 40 s: without backoff that would be 40 failed reloads.
    expect(file.events.reloads).toBeLessThanOrEqual(8);
    expect(outcomes.every((o) => !o.outcome.ok)).toBe(true);
    expect(clock.sleeps.slice(0, 6)).toEqual([100, 500, 1000, 2000, 4000, 8000]);
    // The same read error is warned about once.
    expect(log.lines.filter((l) => l.level === 'warn')).toHaveLength(1);

    rmdirSync(path);
    writeFileSync(path, 'n=5');
    await until(() => clock.pending > 0, 'a scheduled reload');
    await clock.advance(60_000);
    await until(() => file.current === 5, 'the recovery');
    // Late events of the recovery may have started one more (settle) cycle; let it finish.
    for (let i = 0; i < 10 && clock.pending > 0; i++) {
      await clock.advance(100);
      await until(() => outcomes.length === file.events.reloads, 'the reload to finish');
    }
    expect(clock.pending).toBe(0);
    const sleeps = clock.sleeps.length;
    writeFileSync(path, 'n=6');
    await until(() => clock.pending > 0, 'a scheduled reload');
    expect(clock.sleeps.slice(sleeps)).toEqual([100]);
    await clock.advance(100);
    await until(() => file.current === 6, 'the update');
  });
});

/** Polls `cond` every 5 ms for at most 5 s (real time; waits for fs events and real reads). */
async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}
