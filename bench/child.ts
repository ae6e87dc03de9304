/**
 * Child processes of the benchmarks (bench/, outside the product): the join service program from the
 * transpiled tree (scripts/bench.mjs writes it; CONFBOOT_BENCH_BUILD names the directory), its
 * "listening" line, its peak resident set size (VmHWM in /proc/<pid>/status) and a bounded stop.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { JOIN_SERVICE_V8_FLAGS } from '../src/app/defaults.js';
import type { BenchServiceConfig } from './service-wiring.js';

/** The transpiled tree of scripts/bench.mjs. */
export function buildDir(): string {
  const dir =
    process.env.CONFBOOT_BENCH_BUILD ??
    resolve(import.meta.dirname, '..', 'node_modules', '.cache', 'confboot-bench');
  if (!existsSync(join(dir, 'bench', 'join-service-process.js')))
    throw new Error(`no transpiled join service in ${dir}: run the benchmarks with \`npm run bench\``);
  return dir;
}

/** The listening line of a service process, and when this process read it. */
export interface Listening {
  /** The service's own wall-clock time when it listened (epoch ms). */
  atMs: number;
  /** performance.now() in this process when the line was read. */
  seenAt: number;
  grpcPort?: number;
  httpPort?: number;
  port?: number;
}

/** A spawned service process. */
export interface ServiceProcess {
  readonly child: ChildProcess;
  /** performance.now() right before spawn. */
  readonly spawnedAt: number;
  /** Resolves once the service printed its listening line (rejects if it exits first or after `timeoutMs`). */
  readonly listening: Promise<Listening>;
  /** Peak RSS so far in bytes (VmHWM), or NaN once the process is gone. */
  peakRssBytes(): number;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code. */
  stop(graceMs?: number): Promise<number | null>;
}

/** Reads VmHWM (peak RSS) of `pid` in bytes. */
export function peakRssOf(pid: number): number {
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

/** Clock ticks per second of /proc/<pid>/task/<tid>/stat's utime and stime (USER_HZ, 100 on Linux). */
const USER_HZ = 100;

/** One reading of a process's threads: CPU seconds and name (/proc/<pid>/task/<tid>/comm) by tid. */
export type ThreadReading = Map<string, { name: string; seconds: number }>;

/** Reads every thread of `pid` (empty when /proc cannot be read; a thread that exits meanwhile is left out). */
export function readThreads(pid: number | undefined): ThreadReading {
  const out: ThreadReading = new Map();
  if (pid === undefined) return out;
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      // Fields after the parenthesised name: state is field 3, utime 14 and stime 15.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(tid, { name, seconds: (Number(fields[11]) + Number(fields[12])) / USER_HZ });
    } catch {
      // The thread exited while we read.
    }
  }
  return out;
}

/**
 * CPU seconds per thread group of `pid` between two readings, by thread name. Node 24 names its
 * threads: the main thread `MainThread`, worker threads `WorkerThread`, V8's platform threads
 * (concurrent GC and compilation) `V8Worker`, the libuv pool `libuv-worker`. Node 20 names every
 * thread `node`; there the main thread is the one whose tid is the pid, the thread that used the most
 * CPU of the others is taken for the one worker thread (the CA worker: in P1h it uses several times
 * what any V8 platform thread does, which Node 24's named threads show), and the rest count as
 * `V8Worker` (V8's threads; libuv's pool and the inspector's use next to nothing in P1h).
 */
export function threadCpuBetween(
  pid: number | undefined,
  before: ThreadReading,
  after: ThreadReading,
): Record<string, number> {
  const deltas = [...after].map(([tid, t]) => ({
    tid,
    name: t.name,
    seconds: t.seconds - (before.get(tid)?.seconds ?? 0),
  }));
  const unnamed = deltas.filter((d) => d.name === 'node');
  if (unnamed.length === deltas.length && unnamed.length > 0) {
    for (const d of unnamed) d.name = d.tid === String(pid) ? 'MainThread' : 'V8Worker';
    const others = unnamed.filter((d) => d.name !== 'MainThread').sort((a, b) => b.seconds - a.seconds);
    if (others[0] !== undefined) others[0].name = 'WorkerThread';
  }
  const out: Record<string, number> = {};
  for (const d of deltas) out[d.name] = (out[d.name] ?? 0) + d.seconds;
  return out;
}

function waitExit(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((r) => child.once('exit', (code) => r(code)));
}

/**
 * Spawns `node <args>` (`node`: this process's binary unless given); stderr goes to `logPath`;
 * resolves `listening` on the first JSON line with `listening: true`.
 */
export function spawnListening(
  args: string[],
  logPath: string,
  timeoutMs = 60_000,
  node = process.execPath,
): ServiceProcess {
  const logFd = openSync(logPath, 'a');
  const spawnedAt = performance.now();
  // CONFBOOT_BENCH_CPU_PROF=<dir>: every child writes a V8 CPU profile there when it exits.
  const profDir = process.env.CONFBOOT_BENCH_CPU_PROF;
  const nodeArgs = profDir ? ['--cpu-prof', '--cpu-prof-dir', profDir] : [];
  const child = spawn(node, [...nodeArgs, ...args], { stdio: ['ignore', 'pipe', logFd] });
  closeSync(logFd);
  const listening = new Promise<Listening>((resolveListening, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`service not listening after ${timeoutMs} ms`)),
      timeoutMs,
    );
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    lines.on('line', (line) => {
      const seenAt = performance.now();
      try {
        const msg = JSON.parse(line) as Omit<Listening, 'seenAt'> & { listening?: boolean };
        if (msg.listening === true) {
          clearTimeout(timer);
          resolveListening({ ...msg, seenAt });
        }
      } catch {
        // Not our line.
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`service exited with ${code} before listening (log: ${logPath})`));
    });
  });
  listening.catch(() => {});
  return {
    child,
    spawnedAt,
    listening,
    peakRssBytes: () => (child.pid === undefined ? Number.NaN : peakRssOf(child.pid)),
    async stop(graceMs = 15_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      try {
        return await waitExit(child);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/**
 * The esbuild bundles of the join service entry points (scripts/bench.mjs), or undefined when the
 * children run from the transpiled tree (CONFBOOT_BENCH_UNBUNDLED=1, or no bundle built).
 */
export function bundleDir(): string | undefined {
  const dir = join(buildDir(), 'bundle');
  if (process.env.CONFBOOT_BENCH_UNBUNDLED === '1') return undefined;
  return existsSync(join(dir, 'join-service-process.mjs')) ? dir : undefined;
}

/** Production CLI modules that scripts/bench.mjs bundles, by their path in the transpiled tree. */
const BUNDLED_CLI: Record<string, string> = { 'src/app/cli/join-service.js': 'bundle/cli-join-service.mjs' };

/**
 * Spawns the benchmark join service (bench/join-service-process.ts, bundled when built) with `config`,
 * on `node` (default: this process's binary).
 */
export function spawnJoinService(config: BenchServiceConfig, logPath: string, node?: string): ServiceProcess {
  const bundled = bundleDir();
  const program = bundled
    ? join(bundled, 'join-service-process.mjs')
    : join(buildDir(), 'bench', 'join-service-process.js');
  // The V8 flags the manifests give the deployed join service.
  return spawnListening([...JOIN_SERVICE_V8_FLAGS, program, JSON.stringify(config)], logPath, 60_000, node);
}

/** Spawns a confboot CLI runner (bench/cli-process.ts), e.g. `src/app/cli/key-service.js runKeyService`. */
export function spawnCli(
  modulePath: string,
  runner: string,
  argv: string[],
  logPath: string,
): ServiceProcess {
  const module = (bundleDir() && BUNDLED_CLI[modulePath]) || modulePath;
  const v8Flags = modulePath === 'src/app/cli/join-service.js' ? JOIN_SERVICE_V8_FLAGS : [];
  return spawnListening(
    [...v8Flags, join(buildDir(), 'bench', 'cli-process.js'), module, runner, ...argv],
    logPath,
  );
}
