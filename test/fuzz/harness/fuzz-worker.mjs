/**
 * The fuzz worker: a worker thread that imports a property module (TypeScript, through
 * ./ts-loader.mjs) and runs one of its properties with fast-check on request. It bumps a shared
 * counter before every call of the code under test, so the main thread (./runner.ts) can tell a hang
 * from slow progress and terminate this thread. Protocol: {id, moduleUrl, name, seed, path?} in,
 * {id, failed, numRuns, report} out.
 */
import { register } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';

register('./ts-loader.mjs', import.meta.url);
const { default: fc } = await import('fast-check');
const progress = new Int32Array(workerData.progress);
const MAX_REPORT = 8000;

parentPort.on('message', async (msg) => {
  try {
    const mod = await import(msg.moduleUrl);
    const def = mod.properties?.[msg.name];
    if (!def) throw new Error(`no property ${JSON.stringify(msg.name)} in ${msg.moduleUrl}`);
    const predicate = (input) => {
      Atomics.add(progress, 0, 1);
      return def.check(input);
    };
    await def.prepare?.();
    const arb = def.arbitrary();
    const prop = def.async ? fc.asyncProperty(arb, predicate) : fc.property(arb, predicate);
    const details = await fc.check(prop, {
      seed: msg.seed,
      numRuns: def.runs,
      ...(msg.path ? { path: msg.path } : {}),
      ...(def.shrink === false ? { endOnFailure: true } : {}),
      ...(def.examples ? { examples: def.examples().map((e) => [e]) } : {}),
    });
    let report = '';
    if (details.failed) {
      const err = details.errorInstance;
      const text = err instanceof Error ? (err.stack ?? err.message) : String(err);
      report = `${fc.defaultReportMessage(details)}\nError: ${text}`.slice(0, MAX_REPORT);
    }
    parentPort.postMessage({ id: msg.id, failed: details.failed, numRuns: details.numRuns, report });
  } catch (err) {
    const report = `fuzz worker error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`;
    parentPort.postMessage({ id: msg.id, failed: true, numRuns: 0, report: report.slice(0, MAX_REPORT) });
  }
});
parentPort.postMessage({ ready: true });
