/**
 * Main-thread side of the fuzz harness: runs a property module's properties in a worker thread
 * (./fuzz-worker.mjs) so that a synchronous parser stuck in a loop is detected and the thread
 * terminated instead of hanging the test run. A watchdog fails the property when no call of the
 * code under test has started or finished for `stallMs()`; the report names the seed, the call
 * number and, when it is a generated run, the input (regenerated here from seed and index).
 */
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { afterAll } from 'vitest';
import { fuzzSeed, stallMs } from './config.js';

/** What the runner needs of a property module loaded in this thread. */
export interface PropertyModule {
  properties: Record<
    string,
    {
      arbitrary: () => fc.Arbitrary<unknown>;
      runs: number;
      examples?: (() => unknown[]) | undefined;
      prepare?: (() => Promise<void>) | undefined;
    }
  >;
}

interface Reply {
  id?: number;
  ready?: boolean;
  failed?: boolean;
  numRuns?: number;
  report?: string;
}

/** Time the worker may take to start and import the property module (loads TypeScript). */
const STARTUP_MS = 90_000;
const POLL_MS = 200;

/** A worker that runs the properties of one module, one at a time. */
export class FuzzWorker {
  private worker: Worker | undefined;
  private progress = new Int32Array(new SharedArrayBuffer(4));
  private nextId = 1;

  /**
   * @param moduleUrl URL of the property module (exports `properties`)
   * @param load the same module loaded in this thread, to describe a hanging input
   */
  constructor(
    private readonly moduleUrl: URL,
    private readonly load: () => Promise<PropertyModule>,
  ) {}

  private start(): Worker {
    this.progress = new Int32Array(new SharedArrayBuffer(4));
    const w = new Worker(new URL('./fuzz-worker.mjs', import.meta.url), {
      workerData: { progress: this.progress.buffer },
      stdout: false,
      stderr: false,
    });
    w.unref();
    this.worker = w;
    return w;
  }

  /**
   * Runs property `name` with the suite's seed; resolves with the number of runs, or rejects with
   * fast-check's report (seed, path, shrunk counterexample, error) or a hang report.
   */
  async check(name: string): Promise<number> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    const seed = fuzzSeed();
    const started = Atomics.load(this.progress, 0);
    return await new Promise<number>((resolve, reject) => {
      let last = started;
      let lastChange = Date.now();
      const cleanup = () => {
        clearInterval(timer);
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      const onMessage = (m: Reply) => {
        if (m.id !== id) return;
        cleanup();
        if (m.failed) reject(new Error(`fuzz property "${name}" failed (seed ${seed}):\n${m.report}`));
        else resolve(m.numRuns ?? 0);
      };
      const onError = (err: Error) => {
        cleanup();
        this.worker = undefined;
        reject(new Error(`fuzz worker crashed in "${name}" (seed ${seed}): ${err.stack ?? err.message}`));
      };
      const onExit = (code: number) => {
        cleanup();
        this.worker = undefined;
        reject(new Error(`fuzz worker exited with code ${code} in "${name}" (seed ${seed})`));
      };
      const timer = setInterval(() => {
        const now = Atomics.load(this.progress, 0);
        if (now !== last) {
          last = now;
          lastChange = Date.now();
          return;
        }
        const limit = now === started ? STARTUP_MS : stallMs();
        if (Date.now() - lastChange < limit) return;
        cleanup();
        this.worker = undefined;
        const call = now - started;
        void worker.terminate();
        void this.describeHang(name, seed, call).then((text) => reject(new Error(text)));
      }, POLL_MS);
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
      worker.postMessage({ id, moduleUrl: this.moduleUrl.href, name, seed });
    });
  }

  private async describeHang(name: string, seed: number, call: number): Promise<string> {
    const head =
      call === 0
        ? `fuzz property "${name}" (seed ${seed}): the worker did not start within ${STARTUP_MS} ms`
        : `fuzz property "${name}" HANGS (seed ${seed}): call #${call} made no progress for ${stallMs()} ms`;
    if (call === 0) return head;
    try {
      const def = (await this.load()).properties[name];
      await def?.prepare?.();
      const examples = def?.examples?.() ?? [];
      if (!def || call > def.runs) return `${head} (during shrinking)`;
      const input =
        call <= examples.length
          ? examples[call - 1]
          : fc.sample(def.arbitrary(), { seed, numRuns: call - examples.length }).at(-1);
      const which = call <= examples.length ? `example ${call}` : `generated run ${call - examples.length}`;
      return `${head}; input (${which}):\n${fc.stringify(input).slice(0, 4000)}`;
    } catch (err) {
      return `${head} (could not regenerate the input: ${String(err)})`;
    }
  }

  /** Terminates the worker. */
  async close(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    if (w) await w.terminate();
  }
}

/**
 * A {@link FuzzWorker} for the property module at `moduleUrl` (`load` imports the same module in
 * this thread), terminated after the file's tests.
 */
export function useFuzzWorker(moduleUrl: URL, load: () => Promise<PropertyModule>): FuzzWorker {
  const w = new FuzzWorker(moduleUrl, load);
  afterAll(() => w.close());
  return w;
}
