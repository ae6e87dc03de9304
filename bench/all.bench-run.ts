/**
 * `npm run bench` (scripts/bench.mjs runs this file through bench/vitest.bench.config.ts): P5, P4,
 * P1, P2 and P3 of issue 7, one after the other, each side by side with its baseline. A full run
 * writes bench/results.json and BENCHMARKS.md. CONFBOOT_BENCH_ONLY=P1,P5 (say) runs a subset and
 * writes bench/results.partial.json only (parts: P1 P2 P2L P3 P4 P5 P6 STAGES HEADROOM REATTEST); CONFBOOT_BENCH_ONLY=RENDER
 * only re-renders BENCHMARKS.md from bench/results.json (after editing bench/analysis.md). Nothing here asserts a time: the numbers are the output.
 * Knobs (defaults): CONFBOOT_BENCH_NODES (1000), CONFBOOT_BENCH_CONCURRENCY (8),
 * CONFBOOT_BENCH_P1_ROUNDS (3), CONFBOOT_BENCH_P1_ROUND_MS (3000), CONFBOOT_BENCH_P3_NODES (100),
 * CONFBOOT_BENCH_P3_HEADSTART_MS (15000), CONFBOOT_BENCH_P4_RUNS (7), CONFBOOT_BENCH_P2_LARGE_NODES
 * (10000; the scaling row P2L), CONFBOOT_BENCH_P2_GENERATORS (1) and CONFBOOT_BENCH_P2L_GENERATORS (2):
 * load-generator processes P2's and P2L's nodes are split over (1 = the benchmark process),
 * CONFBOOT_BENCH_P2_NOCAP=1 (also
 * run P2 with the concurrency cap off), CONFBOOT_BENCH_CPU_PROF=<dir> (CPU profiles of the children),
 * CONFBOOT_BENCH_KEEP_LOGS=1 (keep the children's logs and print where), CONFBOOT_BENCH_HEADROOM_ROUNDS (5:
 * interleaved P1h rounds per runtime when CONFBOOT_BENCH_COMPARE_NODE is set; 0 skips them).
 * Set by scripts/bench.mjs for CONFBOOT_BENCH_COMPARE_NODE: CONFBOOT_BENCH_COMPARE_OUT (the
 * comparison run writes its results there, nothing else) and CONFBOOT_BENCH_COMPARE_RESULTS (the
 * main run reads them into `compare`, rendered as the before/after section).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BenchCluster, createBenchCluster, envInt } from './fixture.js';
import { benchHeadroom } from './headroom.js';
import { benchP1 } from './p1-throughput.js';
import { benchP2 } from './p2-burst.js';
import { benchP3 } from './p3-delay.js';
import { benchP4 } from './p4-startup.js';
import { benchReattestation, reattestationRow } from './reattestation.js';
import { type BenchResults, finishMachineInfo, machineInfo, renderMarkdown } from './report.js';
import { benchSilentAttack } from './silent-attack.js';
import { benchStages } from './stages.js';
import { benchVtpmValidation } from './vtpm-validation.js';

const only = process.env.CONFBOOT_BENCH_ONLY?.split(',').map((s) => s.trim().toUpperCase());
const enabled = (part: string) => only === undefined || only.includes(part);
const runIf = (part: string) => (enabled(part) ? it : it.skip);

const parameters = {
  nodes: envInt('CONFBOOT_BENCH_NODES', 1000),
  concurrency: envInt('CONFBOOT_BENCH_CONCURRENCY', 8),
  p1Rounds: envInt('CONFBOOT_BENCH_P1_ROUNDS', 3),
  p1RoundMs: envInt('CONFBOOT_BENCH_P1_ROUND_MS', 3000),
  p3Nodes: envInt('CONFBOOT_BENCH_P3_NODES', 100),
  p3HeadStartMs: envInt('CONFBOOT_BENCH_P3_HEADSTART_MS', 15_000),
  p4Runs: envInt('CONFBOOT_BENCH_P4_RUNS', 7),
  p2LargeNodes: envInt('CONFBOOT_BENCH_P2_LARGE_NODES', 10_000),
  p2Generators: envInt('CONFBOOT_BENCH_P2_GENERATORS', 1),
  p2LargeGenerators: envInt('CONFBOOT_BENCH_P2L_GENERATORS', 2),
};

// Re-render BENCHMARKS.md from the last full run's results (after editing bench/analysis.md). Its own
// suite: vitest runs no hooks of a suite whose tests are all skipped, as the benchmarks' are here.
describe.runIf(only?.includes('RENDER'))('BENCHMARKS.md from bench/results.json', () => {
  it('re-renders BENCHMARKS.md', () => {
    const benchDir = import.meta.dirname;
    const last = JSON.parse(readFileSync(join(benchDir, 'results.json'), 'utf8')) as BenchResults;
    writeFileSync(join(benchDir, '..', 'BENCHMARKS.md'), renderMarkdown(last));
  });
});

describe('confboot benchmarks (issue 7)', () => {
  const started = Date.now();
  const results: BenchResults = { machine: machineInfo(), parameters };
  const compareOut = process.env.CONFBOOT_BENCH_COMPARE_OUT;
  const compareIn = process.env.CONFBOOT_BENCH_COMPARE_RESULTS;
  if (compareIn) results.compare = JSON.parse(readFileSync(compareIn, 'utf8')) as BenchResults;
  let cluster: BenchCluster;
  let logDir: string;

  beforeAll(async () => {
    cluster = await createBenchCluster();
    logDir = mkdtempSync(join(tmpdir(), 'confboot-bench-logs-'));
  });

  afterAll(async () => {
    finishMachineInfo(results.machine, started);
    const json = `${JSON.stringify(results, null, 2)}\n`;
    const benchDir = import.meta.dirname;
    if (compareOut !== undefined) {
      writeFileSync(compareOut, json);
    } else if (only === undefined) {
      writeFileSync(join(benchDir, 'results.json'), json);
      writeFileSync(join(benchDir, '..', 'BENCHMARKS.md'), renderMarkdown(results));
    } else {
      writeFileSync(join(benchDir, 'results.partial.json'), json);
    }
    if (!only?.includes('RENDER') && compareOut === undefined)
      process.stdout.write(`\n${renderMarkdown(results)}\n`);
    await cluster?.close();
    if (logDir && process.env.CONFBOOT_BENCH_KEEP_LOGS === '1')
      process.stdout.write(`bench: service logs kept in ${logDir}\n`);
    else if (logDir) rmSync(logDir, { recursive: true, force: true });
  });

  runIf('P5')('P5: vTPM validation ÷ raw crypto floor', async () => {
    results.p5 = await benchVtpmValidation();
    expect(results.p5.floorUs).toBeGreaterThan(0);
  });

  // R1 (issue 41, re-attestation): bench/reattestation.ts.
  runIf('REATTEST')('R1: one re-attestation round over N joined nodes, CPU per round', async () => {
    const r = await benchReattestation({ nodes: parameters.nodes });
    results.extraRows = { ...results.extraRows, reattest: reattestationRow(r) };
    results.reattestation = r;
    expect(r.cpuMsPerRound).toBeGreaterThan(0);
  });

  runIf('P4')('P4: join service start-to-listening ÷ node -e 0', async () => {
    results.p4 = await benchP4(cluster, logDir, parameters.p4Runs);
    expect(results.p4.nodeMs).toBeGreaterThan(0);
  });

  runIf('P1')('P1: join tickets/s on fresh attested connections ÷ plain mTLS calls/s', async () => {
    results.p1 = await benchP1(cluster, logDir, {
      concurrency: parameters.concurrency,
      rounds: parameters.p1Rounds,
      roundMs: parameters.p1RoundMs,
    });
    expect(results.p1.mtlsCalls).toBeGreaterThan(0);
  });

  runIf('STAGES')('stage costs of one join (service and node side)', async () => {
    results.stages = await benchStages(cluster);
    expect(results.stages.length).toBeGreaterThan(0);
  });

  // P6 (issue 12, admission): bench/silent-attack.ts.
  runIf('P6')('P6: honest join latency with 1,000 silent connections held ÷ without', async () => {
    results.p6 = await benchSilentAttack(cluster, envInt('CONFBOOT_BENCH_P6_JOINS', 40));
    expect(results.p6.held).toBeGreaterThan(0);
  });

  runIf('P2')('P2: burst of N nodes against one join-service process', async () => {
    results.p2 = await benchP2(cluster, logDir, parameters.nodes, {
      label: 'default',
      generators: parameters.p2Generators,
    });
    expect(results.p2.successes + results.p2.failures).toBe(parameters.nodes);
    // What-if (opt-in, it doubles P2's time): the same burst with the service's concurrency cap off.
    if (process.env.CONFBOOT_BENCH_P2_NOCAP === '1')
      results.p2NoCap = await benchP2(cluster, logDir, parameters.nodes, {
        maxConcurrent: 0,
        label: 'nocap',
        generators: parameters.p2Generators,
      });
  });

  runIf('HEADROOM')('headroom: P1 join side with the service in its own process', async () => {
    results.headroom = await benchHeadroom(cluster, logDir, {
      concurrency: parameters.concurrency,
      ms: parameters.p1Rounds * parameters.p1RoundMs,
    });
    expect(results.headroom.joins).toBeGreaterThan(0);
  });

  // P1h's runtime ratio from interleaved rounds: one comparison run on Node 20 and one on Node 24,
  // minutes apart, gave ratios 1.23–1.52 across a day, because the machine's speed drifts between
  // them; alternating the service's runtime round by round, with the same generator, cancels that.
  const compareNode = process.env.CONFBOOT_BENCH_COMPARE_NODE;
  // 0 skips the interleaved rounds, as the knob's description at the top of this file says.
  const rounds = envInt('CONFBOOT_BENCH_HEADROOM_ROUNDS', 5, 0);
  const interleaved =
    enabled('HEADROOM') && compareNode !== undefined && compareOut === undefined && rounds > 0;
  (interleaved ? it : it.skip)(
    'headroom, interleaved: the service on the comparison Node and on this one, round by round',
    async () => {
      const ms = parameters.p1Rounds * parameters.p1RoundMs;
      results.headroomRounds = [];
      for (let i = 0; i < rounds; i++)
        for (const runtime of ['compare', 'main'] as const) {
          const h = await benchHeadroom(cluster, logDir, {
            concurrency: parameters.concurrency,
            ms,
            ...(runtime === 'compare' ? { serviceNode: compareNode } : {}),
          });
          const { serviceCpuMsPerJoin, oneCoreJoinPerSecond, joins, failures, threadsMsPerJoin } = h;
          results.headroomRounds.push({
            runtime,
            serviceCpuMsPerJoin,
            oneCoreJoinPerSecond,
            joins,
            failures,
            threadsMsPerJoin,
          });
        }
      expect(results.headroomRounds.length).toBe(2 * rounds);
    },
  );

  runIf('P2L')(
    'P2 at scale: burst of 10,000 nodes against one join-service process',
    async () => {
      results.p2Large = await benchP2(cluster, logDir, parameters.p2LargeNodes, {
        label: 'large',
        generators: parameters.p2LargeGenerators,
      });
      expect(results.p2Large.successes + results.p2Large.failures).toBe(parameters.p2LargeNodes);
    },
    1_800_000,
  );

  runIf('P3')('P3: join delay after the join service becomes reachable (nodes started first)', async () => {
    const base = await benchP3(cluster, logDir, {
      nodes: parameters.p3Nodes,
      headStartMs: parameters.p3HeadStartMs,
      label: 'default',
    });
    const capped = await benchP3(cluster, logDir, {
      nodes: parameters.p3Nodes,
      headStartMs: parameters.p3HeadStartMs,
      label: 'capped',
      backoff: { initialMs: 1_000, maxMs: 2_000 },
    });
    results.p3 = [base, capped];
    expect(base.joined).toBe(parameters.p3Nodes);
  });
});
