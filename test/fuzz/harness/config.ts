/**
 * Fuzz-suite settings (test/fuzz/README.md): a fixed seed by default so CI is deterministic,
 * CONFBOOT_FUZZ_SEED to replay or vary it, and CONFBOOT_FUZZ_RUNS for the long variant. Shared by
 * the vitest files and the property modules that run inside the fuzz worker.
 */

/** The default seed: every CI run explores the same inputs. */
export const DEFAULT_FUZZ_SEED = 0x5eed_c0f;

function envInt(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`${name}=${JSON.stringify(raw)} is not an integer`);
  return n;
}

/** The seed of every fast-check run in the suite (CONFBOOT_FUZZ_SEED or {@link DEFAULT_FUZZ_SEED}). */
export function fuzzSeed(): number {
  return envInt('CONFBOOT_FUZZ_SEED') ?? DEFAULT_FUZZ_SEED;
}

/** How expensive one run of a property is, which decides how the long variant scales it. */
export type RunWeight = 'light' | 'heavy';

/**
 * Number of runs of a property: `base` normally; with CONFBOOT_FUZZ_RUNS=N, N for light properties
 * and N/1000 (at least `base`) for heavy ones (megabyte inputs, loopback RPCs).
 */
export function fuzzRuns(base: number, weight: RunWeight = 'light'): number {
  const long = envInt('CONFBOOT_FUZZ_RUNS');
  if (long === undefined) return base;
  if (long < 1) throw new Error('CONFBOOT_FUZZ_RUNS must be at least 1');
  return weight === 'heavy' ? Math.max(base, Math.floor(long / 1000)) : long;
}

/** True when the long variant is requested. */
export function isLongFuzz(): boolean {
  return envInt('CONFBOOT_FUZZ_RUNS') !== undefined;
}

/**
 * How long one run (one call of the code under test) may make no progress before the harness calls
 * it a hang: CONFBOOT_FUZZ_STALL_MS, default 20 s. This is a hang bound, not a performance check;
 * a healthy run takes milliseconds.
 */
export function stallMs(): number {
  return envInt('CONFBOOT_FUZZ_STALL_MS') ?? 20_000;
}

/**
 * A vitest timeout for a test doing `runs` runs of about `perRunMs` each: at least 120 s, scaled
 * up for the long variant. A bound on a wait, not a performance check.
 */
export function testTimeoutMs(runs: number, perRunMs: number): number {
  return Math.max(120_000, runs * perRunMs * 4);
}

/**
 * Timeout of the worker-run fuzz tests: 120 s normally (a run takes seconds), 6 h for the long
 * variant. Hangs are caught sooner by the stall watchdog ({@link stallMs}).
 */
export function workerTestTimeoutMs(): number {
  return isLongFuzz() ? 6 * 3600_000 : 120_000;
}
