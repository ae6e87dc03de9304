/**
 * The end of a mini run: waiting until every process it started is gone (checked by pid and start
 * time in /proc, so a reused pid does not count), pruning the work directory to its logs, and the
 * note a `--keep` run leaves for `confboot mini down`.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { listMiniNamespaces, removeNamespace } from '../vm/private-network.js';
import { run } from '../vm/run.js';

/** Where a `--keep` run notes its work directory per namespace, for `mini down` (root's tmpfs). */
const KEPT_DIR = '/run/confboot-mini';

/** A process a run started: its pid, its start time (from /proc) and what it is. */
export interface TrackedProcess {
  pid: number;
  startTime: string | undefined;
  what: string;
}

/** Field 22 of /proc/PID/stat (start time in clock ticks); undefined when the process is gone. */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/** Records `pid` (started just now) with its start time. */
export function trackProcess(pid: number, what: string): TrackedProcess {
  return { pid, startTime: startTimeOf(pid), what };
}

function stillThere(p: TrackedProcess): boolean {
  const now = startTimeOf(p.pid);
  return now !== undefined && (p.startTime === undefined || now === p.startTime);
}

/** Pids of the processes in network namespace `netns`. */
export async function namespacePids(netns: string): Promise<number[]> {
  const { stdout } = await run('ip', ['netns', 'pids', netns], { allowFailure: true });
  return stdout
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((p) => Number.isInteger(p) && p > 1);
}

/**
 * Waits up to `timeoutMs` until none of `processes` exists any more (a zombie still counts: its
 * parent has not collected it) and namespace `netns` is not listed; returns what is still there.
 */
export async function waitGone(
  processes: readonly TrackedProcess[],
  netns: string | undefined,
  timeoutMs: number,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = processes.filter(stillThere).map((p) => `${p.what} (pid ${p.pid})`);
    if (netns !== undefined && (await listMiniNamespaces()).some((n) => n.name === netns))
      left.push(`network namespace ${netns}`);
    if (left.length === 0 || Date.now() > deadline) return left;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Removes what a run leaves besides its logs (TPM state, disks, bundles, firmware variables). */
export async function pruneWorkDir(dir: string): Promise<void> {
  if (!existsSync(dir)) return;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) await pruneWorkDir(p);
    else if (!entry.name.endsWith('.log') && !entry.name.endsWith('.json')) await rm(p, { force: true });
  }
  for (const entry of await readdir(dir, { withFileTypes: true }))
    if (entry.isDirectory() && (await readdir(join(dir, entry.name))).length === 0)
      await rm(join(dir, entry.name), { recursive: true });
}

/** Notes a kept run's work directory for `mini down`. */
export async function keepRun(netns: string, workDir: string): Promise<void> {
  await mkdir(KEPT_DIR, { recursive: true });
  await writeFile(join(KEPT_DIR, netns), workDir);
}

/** Prunes the work directory a `--keep` run noted for `netns` (secrets, disks, TPM state) and forgets it. */
export async function forgetKept(netns: string): Promise<void> {
  const note = join(KEPT_DIR, netns);
  if (!existsSync(note)) return;
  await pruneWorkDir((await readFile(note, 'utf8')).trim());
  await rm(note, { force: true });
}

/**
 * `confboot mini down`: removes every mini namespace with everything in it (QEMU, dnsmasq, the
 * metadata server; each swtpm ends with its QEMU) and prunes a kept run's work directory to its logs.
 */
export async function miniDown(): Promise<string[]> {
  const names = (await listMiniNamespaces()).map((n) => n.name);
  for (const n of names) {
    await removeNamespace(n);
    await forgetKept(n);
  }
  return names;
}
