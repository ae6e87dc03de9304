/**
 * A lock on one entry of the node-image cache, so that two builds of the same thing at once (the VM
 * test files start together; two `confboot mini` runs) do the work once: the first takes the lock and
 * builds, the others wait for it and then find the result in the cache.
 *
 * The lock is a directory created with mkdir (atomic on every local file system) holding an `owner`
 * file with the holder's pid. A lock whose holder no longer runs (killed, crashed) is stale and is
 * taken over; a live holder is waited for, up to a bound, after which the waiter fails naming the
 * holder and the lock path.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { processRuns } from './run.js';

/** Options of {@link withCacheLock}. */
export interface CacheLockOptions {
  /** How long to wait for another holder, ms (default 20 minutes: a cold image build under load). */
  timeoutMs?: number;
  /** Poll interval while waiting, ms (default 500). */
  pollMs?: number;
  /** Progress lines (once when the wait starts). */
  log?: (line: string) => void;
  /** Whether process `pid` runs (default: `process.kill(pid, 0)`). */
  isAlive?: (pid: number) => boolean;
}

async function holderOf(lock: string): Promise<number | undefined> {
  try {
    const pid = Number.parseInt(await readFile(join(lock, 'owner'), 'utf8'), 10);
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

async function tryTake(lock: string): Promise<boolean> {
  try {
    await mkdir(lock);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  await writeFile(join(lock, 'owner'), `${process.pid}\n`);
  return true;
}

/**
 * Runs `fn` holding the lock directory `lock` (its parent is created). Waits while another live
 * process holds it; takes over a lock whose holder is gone (or that names no holder after a poll
 * interval: a holder stopped between mkdir and writing its pid). Always releases the lock.
 * @throws Error naming the holder when the wait exceeds `timeoutMs`.
 */
export async function withCacheLock<T>(
  lock: string,
  fn: () => Promise<T>,
  options: CacheLockOptions = {},
): Promise<T> {
  const timeoutMs = options.timeoutMs ?? 20 * 60_000;
  const pollMs = options.pollMs ?? 500;
  const alive = options.isAlive ?? processRuns;
  await mkdir(dirname(lock), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  let told = false;
  let ownerless = 0;
  while (!(await tryTake(lock))) {
    const holder = await holderOf(lock);
    if (holder === undefined ? ++ownerless > 1 : holder !== process.pid && !alive(holder)) {
      options.log?.(`taking over the stale cache lock ${lock} (holder ${holder ?? 'unknown'} is gone)`);
      await rm(lock, { recursive: true, force: true });
      ownerless = 0;
      continue;
    }
    if (holder !== undefined) ownerless = 0;
    if (Date.now() >= deadline)
      throw new Error(
        `waited ${Math.round(timeoutMs / 1000)} s for the cache lock ${lock} held by pid ${holder ?? 'unknown'}; remove it if that process is not a confboot build`,
      );
    if (!told) {
      options.log?.(`waiting for pid ${holder ?? 'unknown'}, which builds the same cache entry (${lock})`);
      told = true;
    }
    await new Promise((r) => setTimeout(r, pollMs));
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}
