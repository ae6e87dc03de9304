/**
 * The benchmark report (bench/, outside the product): machine information, the results object that
 * goes to bench/results.json, and BENCHMARKS.md rendered from it plus the hand-written analysis in
 * bench/analysis.md (why a target is missed and what would close the gap).
 */
import { readFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import type { HeadroomResult } from './headroom.js';
import type { P1Result } from './p1-throughput.js';
import type { P2Result } from './p2-burst.js';
import type { P3Result } from './p3-delay.js';
import type { P4Result } from './p4-startup.js';
import type { SilentAttackResult } from './silent-attack.js';
import type { FloorPart, StageCost } from './stages.js';
import type { VtpmValidationBench } from './vtpm-validation.js';

/** Where and when a run happened. */
export interface MachineInfo {
  cpuModel: string;
  cores: number;
  memoryGB: number;
  node: string;
  /** OpenSSL linked into that Node (process.versions.openssl); absent in runs before it was recorded. */
  openssl?: string;
  kernel: string;
  /** 1/5/15-minute load averages at the start and the end of the run. */
  loadAverageStart: number[];
  loadAverageEnd: number[];
  date: string;
  durationSeconds: number;
}

/** Everything one `npm run bench` measured. */
export interface BenchResults {
  machine: MachineInfo;
  parameters: Record<string, number>;
  p1?: P1Result;
  p2?: P2Result;
  /** P2 again with the service's concurrency cap off (what-if). */
  p2NoCap?: P2Result;
  p3?: P3Result[];
  p4?: P4Result;
  p5?: VtpmValidationBench;
  /** P6: honest join latency under 1,000 held silent connections (bench/silent-attack.ts). */
  p6?: SilentAttackResult;
  stages?: StageCost[];
  /** P2 with the large burst (scaling row, CONFBOOT_BENCH_P2_LARGE_NODES). */
  p2Large?: P2Result;
  /** P1's join side with the service in its own process. */
  headroom?: HeadroomResult;
  /**
   * Rows added by other benchmark modules (rendered as given after the P rows): a module sets
   * `results.extraRows[key] = { row, details }` with `row` one Markdown table row of five cells.
   */
  extraRows?: Record<string, { row: string; details?: string[] }>;
  /** R1: one re-attestation round over N joined nodes (bench/reattestation.ts). */
  reattestation?: import('./reattestation.js').ReattestationBench;
  /**
   * P1h's service alternately on the comparison binary and on this one (CONFBOOT_BENCH_COMPARE_NODE),
   * the same load generator (this process) for both: the runtime ratio of "one core carries".
   */
  headroomRounds?: HeadroomRound[];
  /**
   * The comparison run on another Node binary in the same session (CONFBOOT_BENCH_COMPARE_NODE,
   * scripts/bench.mjs): its P4, P1, P1h, P2 and P2L, rendered side by side with this run's.
   */
  compare?: BenchResults;
}

/** One interleaved P1h round (see {@link BenchResults.headroomRounds}). */
export interface HeadroomRound {
  /** `compare`: the service ran on CONFBOOT_BENCH_COMPARE_NODE; `main`: on this run's Node. */
  runtime: 'compare' | 'main';
  serviceCpuMsPerJoin: number;
  oneCoreJoinPerSecond: number;
  joins: number;
  failures: number;
  /** The service's CPU per join by thread ({@link HeadroomResult.threadsMsPerJoin}); absent before 2026-11-27. */
  threadsMsPerJoin?: Record<string, number>;
}

/** Machine information now (load average at start; the end is filled in by {@link finishMachineInfo}). */
export function machineInfo(): MachineInfo {
  const cpu = cpus();
  return {
    cpuModel: cpu[0]?.model.trim() ?? 'unknown',
    cores: cpu.length,
    memoryGB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    openssl: process.versions.openssl,
    kernel: release(),
    loadAverageStart: loadavg().map(round2),
    loadAverageEnd: [],
    date: new Date().toISOString(),
    durationSeconds: 0,
  };
}

/** Fills in the end-of-run fields. */
export function finishMachineInfo(info: MachineInfo, startedMs: number): void {
  info.loadAverageEnd = loadavg().map(round2);
  info.durationSeconds = Math.round((Date.now() - startedMs) / 100) / 10;
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

function fmt(n: number | undefined, digits = 2): string {
  return n === undefined || Number.isNaN(n) ? 'n/a' : n.toFixed(digits);
}

function verdict(ok: boolean | undefined): string {
  return ok === undefined ? 'not run' : ok ? '**met**' : '**missed**';
}

function p2Row(name: string, p2: P2Result, judged: boolean, base?: P2Result): string {
  const large = base !== undefined;
  // Issue 15: 1,000 nodes — 0 failures, wall ≤ 6 s, p99 ≤ 5 s, RSS ≤ 250 MB (first bar p99 ≤ 8 s);
  // 10,000 nodes — 0 failures, RSS ≤ 400 MB, wall within 1.2× of 10 × the 1,000-node wall.
  const linearWall = large ? 1.2 * (p2.nodes / base.nodes) * base.wallSeconds : Number.NaN;
  const ok = large
    ? p2.failures === 0 && p2.peakRssMB <= 400 && p2.wallSeconds <= linearWall
    : p2.failures === 0 && p2.wallSeconds <= 6 && p2.p99Seconds <= 5 && p2.peakRssMB <= 250;
  const firstBar = !large && p2.failures === 0 && p2.p99Seconds <= 8;
  const what =
    p2.maxConcurrent === 0
      ? `same burst, the service's concurrency cap off (what-if, see analysis)`
      : `burst of ${p2.nodes} nodes against one join-service process (concurrency cap ${p2.maxConcurrent}; refused attempts retried with the join flow's backoff)`;
  const target = large
    ? `0 failures, ≤ 400 MB, wall ≤ 1.2 × ${p2.nodes / base.nodes} × ${fmt(base.wallSeconds, 1)} s = ${fmt(linearWall, 1)} s`
    : '0 failures, ≤ 6 s, p99 ≤ 5 s (first bar 8 s), ≤ 250 MB';
  const v = !judged
    ? ok
      ? 'would meet'
      : 'would miss'
    : p2.nodes >= 1000
      ? ok
        ? '**met**'
        : firstBar
          ? '**first bar met** (p99 ≤ 8 s)'
          : '**missed**'
      : `not judged (target is for 1000 nodes; ${ok ? 'within' : 'outside'} it at ${p2.nodes})`;
  const cpu = Number.isFinite(p2.serviceCpuMsPerJoin)
    ? `; service CPU **${fmt(p2.serviceCpuMsPerJoin)} ms per join** (${fmt(p2.serviceCores)} cores busy; nodes ${fmt(p2.nodesCores)} cores in ${p2.generators ?? 1} load-generator process${(p2.generators ?? 1) > 1 ? 'es' : ''})`
    : '';
  return `| ${name} | ${what} | ${p2.successes} joined, **${p2.failures} failed**, ${p2.attempts - p2.nodes} retries; wall **${fmt(p2.wallSeconds, 1)} s**; time to ticket p50 ${fmt(p2.p50Seconds)} s, p99 **${fmt(p2.p99Seconds)} s**; peak RSS **${fmt(p2.peakRssMB, 0)} MB**${cpu} | ${target} | ${v} |`;
}

/** The four parts of P8's floor, in order, with their names in the table. */
const FLOOR_PARTS: ReadonlyArray<[FloorPart, string]> = [
  ['tls-handshake', 'server-side mutual-TLS 1.3 handshake'],
  ['validation', 'qemu-vtpm validation'],
  ['inspect-csr', 'CSR inspection'],
  ['sign', 'kubelet-certificate signature'],
];

/** P8 (the service's CPU per join ÷ the floor) from P1h and the stage costs, or undefined without both. */
export function p8Of(
  r: BenchResults,
):
  | { serviceUs: number; floorUs: number; ratio: number; parts: Array<[FloorPart, string, number]> }
  | undefined {
  const h = r.headroom;
  if (!h || !r.stages) return undefined;
  const parts: Array<[FloorPart, string, number]> = [];
  for (const [part, name] of FLOOR_PARTS) {
    const cpuUs = r.stages.find((st) => st.floor === part)?.cpuUs;
    if (cpuUs === undefined) return undefined;
    parts.push([part, name, cpuUs]);
  }
  const floorUs = parts.reduce((a, [, , us]) => a + us, 0);
  const serviceUs = h.serviceCpuMsPerJoin * 1000;
  return { serviceUs, floorUs, ratio: serviceUs / floorUs, parts };
}

function p8Rows(r: BenchResults): { row: string; details: string[] } | undefined {
  const p8 = p8Of(r);
  const h = r.headroom;
  if (!p8 || !h) return undefined;
  const us = (part: FloorPart) => p8.parts.find(([p]) => p === part)?.[2] ?? Number.NaN;
  const sum = p8.parts.map(([, , cpuUs]) => fmt(cpuUs / 1000, 3)).join(' + ');
  const row = `| P8 | distance to the floor: the service's CPU per join (P1h, from its /metrics) ÷ the CPU, measured in this run (stage table), of one ${p8.parts.map(([, n]) => n).join(', one ')} | ${fmt(p8.serviceUs / 1000, 3)} ms ÷ (${sum} = ${fmt(p8.floorUs / 1000, 3)} ms) = **${fmt(p8.ratio)}** | ≤ 1.2 | ${verdict(p8.ratio <= 1.2)} |`;
  // Where the rest goes, from P1h's one-client pass (bench/headroom.ts): the service's stage
  // histograms (wall time per operation) against the floor of the same stage; what neither
  // histogram covers (TLS, the attestation exchange, HTTP/2 and gRPC framing, the connection's
  // set-up and close) is the service's CPU per join minus both, against the handshake.
  const seq = h.sequential;
  const details: string[] = [];
  if (seq) {
    const validationFloor = us('validation');
    const ticketFloor = us('inspect-csr') + us('sign');
    const seqUs = seq.serviceCpuMsPerJoin * 1000;
    const restUs = seqUs - (seq.validationMeanMs + seq.requestMeanMs) * 1000;
    const overheads: Array<[string, number, number]> = [
      ['attestation validation', seq.validationMeanMs * 1000, validationFloor],
      [
        'ticket handling once attested (CSR inspection and signature in the CA worker, the state disk key from the key service, the ticket)',
        seq.requestMeanMs * 1000,
        ticketFloor,
      ],
      [
        'the rest (TLS handshake, attestation exchange, HTTP/2 + gRPC, connection set-up and close)',
        restUs,
        us('tls-handshake'),
      ],
    ];
    const excess = ([, got, floor]: [string, number, number]) => got - floor;
    const largest = [...overheads].sort((x, y) => excess(y) - excess(x))[0];
    details.push(
      `- P8 by stage, from P1h's one-client pass (${seq.joins} joins; the service's CPU per join there ${fmt(seqUs / 1000, 3)} ms; its stage histograms are wall time, so the ticket handling includes waiting for the key service and the CA worker): ${overheads
        .map(
          ([name, got, floor]) =>
            `${name} ${fmt(got / 1000, 3)} ms vs floor ${fmt(floor / 1000, 3)} ms (${got >= floor ? '+' : ''}${fmt((got - floor) / 1000, 3)} ms)`,
        )
        .join('; ')}. Largest remaining overhead: **${largest?.[0] ?? 'n/a'}**.`,
    );
  }
  const byThread = p8ByThread(h, us, r.stages);
  if (byThread) details.push(byThread);
  return { row, details };
}

/**
 * P8 by thread: the service's CPU per join in P1h's timed loop on each of its threads (CPU time, not
 * wall time, so nothing here is waiting), against the floor stages that run on that thread.
 */
function p8ByThread(
  h: HeadroomResult,
  us: (part: FloorPart) => number,
  stages: StageCost[] | undefined,
): string | undefined {
  const t = h.threadsMsPerJoin;
  if (!t || t.MainThread === undefined) return undefined;
  const loopFloor = (us('tls-handshake') + us('validation')) / 1000;
  const caFloor = (us('inspect-csr') + us('sign')) / 1000;
  const main = t.MainThread;
  const ca = t.WorkerThread ?? 0;
  const helpers = t.V8Worker ?? 0;
  const other = Object.entries(t)
    .filter(([name]) => !['MainThread', 'WorkerThread', 'V8Worker'].includes(name))
    .reduce((a, [, ms]) => a + ms, 0);
  const signed = (x: number) => `${x >= 0 ? '+' : ''}${fmt(x, 3)}`;
  const callUs = stages?.find((st) => st.reference === 'grpc-call')?.cpuUs;
  const floorWithCall = (callUs ?? 0) + us('validation') + us('inspect-csr') + us('sign');
  const grpc =
    callUs === undefined
      ? ''
      : ` For comparison, a plain grpc-js mutual-TLS server spends ${fmt(callUs / 1000, 3)} ms of CPU on one unary call on a fresh connection (stage table), ${signed((callUs - us('tls-handshake')) / 1000)} ms beyond the handshake floor: what HTTP/2 and gRPC cost a connection that carries one call, with no confboot code on it. With that call in place of the bare handshake the floor would be ${fmt(floorWithCall / 1000, 3)} ms, and the service's ${fmt(h.serviceCpuMsPerJoin, 3)} ms is ${fmt((h.serviceCpuMsPerJoin * 1000) / floorWithCall)} × that.`;
  return `- P8 by thread (P1h's timed loop, CPU time per join from /proc/<pid>/task): the event loop ${fmt(main, 3)} ms against its floor stages, handshake + validation ${fmt(loopFloor, 3)} ms (${signed(main - loopFloor)} ms: the attestation exchange, HTTP/2 + gRPC, connection set-up and close, the worker and key-service messages, logs, metrics, its own garbage collection); the CA worker thread ${fmt(ca, 3)} ms against CSR inspection + signature ${fmt(caFloor, 3)} ms (${signed(ca - caFloor)} ms; the stage table measures those two on the benchmark process's event loop as process CPU, V8's helper threads included, which are counted apart here); V8's helper threads (concurrent garbage collection and compilation for both) ${fmt(helpers, 3)} ms; the rest ${fmt(other, 3)} ms.${grpc}`;
}

/** The median of `xs` (non-empty). */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

/**
 * The interleaved P1h rounds' CPU per join on one thread group (`MainThread`, `WorkerThread`,
 * `V8Worker`), the median over the rounds of `runtime`; undefined when a round lacks it.
 */
export function roundsThreadMedian(
  r: BenchResults,
  runtime: HeadroomRound['runtime'],
  thread: string,
): number | undefined {
  const xs = (r.headroomRounds ?? [])
    .filter((x) => x.runtime === runtime)
    .map((x) => x.threadsMsPerJoin?.[thread]);
  if (xs.length === 0 || xs.some((x) => x === undefined)) return undefined;
  return median(xs as number[]);
}

/**
 * The interleaved P1h rounds' "one core carries" figures and medians, per runtime, and each round's
 * ratio (main ÷ the comparison round just before it: the two ran back to back, so the machine's drift
 * between rounds cancels in it) with their median.
 */
export function interleavedHeadroom(r: BenchResults):
  | {
      compare: number[];
      main: number[];
      compareMedian: number;
      mainMedian: number;
      pairRatios: number[];
      pairMedian: number;
    }
  | undefined {
  const rounds = r.headroomRounds;
  if (!rounds || rounds.length === 0) return undefined;
  const of = (runtime: HeadroomRound['runtime']) =>
    rounds.filter((x) => x.runtime === runtime).map((x) => x.oneCoreJoinPerSecond);
  const compare = of('compare');
  const main = of('main');
  if (compare.length === 0 || main.length === 0) return undefined;
  const pairRatios = rounds.flatMap((x, i) => {
    const before = rounds[i - 1];
    return x.runtime === 'main' && before?.runtime === 'compare'
      ? [x.oneCoreJoinPerSecond / before.oneCoreJoinPerSecond]
      : [];
  });
  return {
    compare,
    main,
    compareMedian: median(compare),
    mainMedian: median(main),
    pairRatios,
    pairMedian: pairRatios.length > 0 ? median(pairRatios) : Number.NaN,
  };
}

/** "Node v… (OpenSSL …)" of a run. */
function runtimeOf(m: MachineInfo): string {
  return `Node ${m.node}${m.openssl ? ` (OpenSSL ${m.openssl})` : ''}`;
}

/**
 * The before/after section: the comparison run (CONFBOOT_BENCH_COMPARE_NODE) and this run side by
 * side for P1, P1h, P2, P2L and P4; the ratio is this run ÷ the comparison run.
 */
function renderCompare(r: BenchResults): string[] {
  const c = r.compare;
  if (!c) return [];
  const a = runtimeOf(c.machine);
  const b = runtimeOf(r.machine);
  const rows: string[] = [];
  const row = (
    name: string,
    figure: string,
    x: number | undefined,
    y: number | undefined,
    digits: number,
    better: 'higher' | 'lower',
    note = '',
  ) => {
    if (x === undefined || y === undefined) return;
    rows.push(
      `| ${name} | ${figure} (${better} is better) | ${fmt(x, digits)} | ${fmt(y, digits)} | **${fmt(y / x)}**${note} |`,
    );
  };
  row('P1', 'join tickets/s', c.p1?.joinPerSecond, r.p1?.joinPerSecond, 1, 'higher');
  row('P1', 'plain mTLS calls/s', c.p1?.mtlsPerSecond, r.p1?.mtlsPerSecond, 1, 'higher');
  row('P1', 'ratio (target ≥ 0.8)', c.p1?.ratio, r.p1?.ratio, 2, 'higher');
  row(
    'P1h',
    'joins/s, service in its own process',
    c.headroom?.joinPerSecond,
    r.headroom?.joinPerSecond,
    1,
    'higher',
  );
  row(
    'P1h',
    'service CPU per join, ms',
    c.headroom?.serviceCpuMsPerJoin,
    r.headroom?.serviceCpuMsPerJoin,
    2,
    'lower',
  );
  const n20 = c.headroom?.oneCoreJoinPerSecond;
  const n24 = r.headroom?.oneCoreJoinPerSecond;
  const rounds = interleavedHeadroom(r);
  // The interleaved rounds decide the target when they ran: the single runs are minutes apart.
  const target =
    n20 !== undefined && n24 !== undefined && !rounds ? ` (target ≥ 1.4: ${verdict(n24 >= 1.4 * n20)})` : '';
  row('P1h', 'one core carries N joins/s', n20, n24, 0, 'higher', target);
  if (rounds)
    row(
      'P1h',
      `one core carries N joins/s, interleaved: median of ${rounds.compare.length} rounds each, the service's runtime alternating round by round (${rounds.compare.map((x) => fmt(x, 0)).join(', ')} vs ${rounds.main.map((x) => fmt(x, 0)).join(', ')}; round by round ${rounds.pairRatios.map((x) => fmt(x)).join(', ')}, median ${fmt(rounds.pairMedian)})`,
      rounds.compareMedian,
      rounds.mainMedian,
      0,
      'higher',
      // Met only when both estimates are: the medians of each runtime's rounds, and the median of the
      // back-to-back ratios (which cancels the machine's drift between pairs of rounds).
      ` (target ≥ 1.4 by both the medians and the round-by-round median: ${verdict(rounds.mainMedian >= 1.4 * rounds.compareMedian && rounds.pairMedian >= 1.4)})`,
    );
  // Where the runtime's speed-up went: the same rounds' CPU per join on each thread.
  for (const [thread, what] of [
    ['MainThread', 'the event loop'],
    ['WorkerThread', 'the CA worker thread'],
    ['V8Worker', "V8's helper threads"],
  ] as const)
    row(
      'P1h',
      `interleaved rounds, ${what}: CPU per join, ms (median)`,
      roundsThreadMedian(r, 'compare', thread),
      roundsThreadMedian(r, 'main', thread),
      3,
      'lower',
    );
  // The floor's stages on both runtimes (STAGES in the comparison run): how much of a join the
  // runtime speeds up, stage by stage, which bounds what P1h's ratio can reach.
  const stageCpu = (res: BenchResults, part: FloorPart) => res.stages?.find((st) => st.floor === part)?.cpuUs;
  let floorC = 0;
  let floorR = 0;
  for (const [part, name] of FLOOR_PARTS) {
    const x = stageCpu(c, part);
    const y = stageCpu(r, part);
    row('P8 floor', `${name}, CPU µs`, x, y, 0, 'lower');
    floorC += x ?? Number.NaN;
    floorR += y ?? Number.NaN;
  }
  row('P8 floor', 'the four together, CPU µs', floorC, floorR, 0, 'lower');
  for (const [name, x, y] of [
    ['P2', c.p2, r.p2],
    ['P2L', c.p2Large, r.p2Large],
  ] as const) {
    if (!x || !y) continue;
    rows.push(
      `| ${name} | nodes joined / failed / retries | ${x.successes} / ${x.failures} / ${x.attempts - x.nodes} | ${y.successes} / ${y.failures} / ${y.attempts - y.nodes} | |`,
    );
    row(name, 'wall, s', x.wallSeconds, y.wallSeconds, 1, 'lower');
    row(name, 'time to ticket p99, s', x.p99Seconds, y.p99Seconds, 2, 'lower');
    row(name, 'service peak RSS, MB', x.peakRssMB, y.peakRssMB, 0, 'lower');
    row(name, 'service CPU per join, ms', x.serviceCpuMsPerJoin, y.serviceCpuMsPerJoin, 2, 'lower');
  }
  row('P4', 'join service start-to-listening, ms', c.p4?.serviceMs, r.p4?.serviceMs, 0, 'lower');
  row('P4', '`node -e 0`, ms', c.p4?.nodeMs, r.p4?.nodeMs, 0, 'lower');
  row('P4', 'ratio (target ≤ 2.5)', c.p4?.ratio, r.p4?.ratio, 2, 'lower');
  row('P4', 'production CLI ratio', c.p4?.cliRatio, r.p4?.cliRatio, 2, 'lower');
  // The floor with the plain grpc-js call in place of the bare handshake, on both runtimes.
  const callOf = (res: BenchResults) => res.stages?.find((st) => st.reference === 'grpc-call')?.cpuUs;
  const handshakeOf = (res: BenchResults) => stageCpu(res, 'tls-handshake');
  const withCall = (res: BenchResults, floor: number) =>
    floor + (callOf(res) ?? Number.NaN) - (handshakeOf(res) ?? Number.NaN);
  const callFloorRatio = withCall(c, floorC) / withCall(r, floorR);
  const callNote = Number.isFinite(callFloorRatio)
    ? ` With the plain grpc-js call on a fresh connection in place of the bare handshake (what any gRPC service answering on fresh connections spends), the floor would let one core carry ${fmt(callFloorRatio)} × as many joins: by this run's stage costs, what a join service with no work of its own beyond those stages would reach.`
    : '';
  const floorNote =
    Number.isFinite(floorC) && Number.isFinite(floorR) && n20 !== undefined && n24 !== undefined
      ? [
          `The floor's four stages take ${fmt(floorR / floorC)} × the CPU on ${b.split(' (')[0]} that they take on ${a.split(' (')[0]}: a join made of nothing but them would let one core carry ${fmt(floorC / floorR)} × as many joins; P1h measured ${fmt(n24 / n20)} ×${rounds ? ` in the two single runs and ${fmt(rounds.mainMedian / rounds.compareMedian)} × in the interleaved rounds (the load generator on ${b.split(' (')[0]} for both)` : ''}, and its target needs 1.4 ×.${callNote}`,
          '',
        ]
      : [];
  return [
    `## ${c.machine.node.split('.')[0]?.replace('v', 'Node ')} vs ${r.machine.node.split('.')[0]?.replace('v', 'Node ')} (same session)`,
    '',
    `The comparison rows ran first on ${a} (started ${c.machine.date}, load ${c.machine.loadAverageStart.join(' / ')} → ${c.machine.loadAverageEnd.join(' / ')}), then the whole benchmark on ${b}; same machine, same build (\`CONFBOOT_BENCH_COMPARE_NODE\`). The last column is ${b.split(' (')[0]} ÷ ${a.split(' (')[0]}.`,
    '',
    `| Row | Figure | ${a} | ${b} | ratio |`,
    '|---|---|---|---|---|',
    ...rows,
    '',
    ...floorNote,
  ];
}

/** Renders BENCHMARKS.md. */
export function renderMarkdown(r: BenchResults): string {
  const m = r.machine;
  const rows: string[] = [];
  const { p1, p2, p3, p4, p5 } = r;
  if (p1)
    rows.push(
      `| P1 | join tickets/s on fresh attested connections ÷ plain grpc-js mTLS unary calls/s on fresh connections (concurrency ${p1.concurrency}) | ${fmt(p1.joinPerSecond, 1)}/s ÷ ${fmt(p1.mtlsPerSecond, 1)}/s = **${fmt(p1.ratio)}** | ≥ 0.8 (first bar 0.6) | ${p1.ratio >= 0.8 ? '**met**' : p1.ratio >= 0.6 ? '**first bar met**' : '**missed**'} |`,
    );
  const h = r.headroom;
  if (h)
    rows.push(
      `| P1h | headroom: P1's join side with the service alone in its process (load generator in another, concurrency ${h.concurrency}, ${fmt(h.seconds, 0)} s) | ${fmt(h.joinPerSecond, 1)} joins/s${p1 ? ` (÷ P1's ${fmt(p1.mtlsPerSecond, 1)} mTLS calls/s = **${fmt(h.joinPerSecond / p1.mtlsPerSecond)}**)` : ''}; service **${fmt(h.serviceCpuMsPerJoin)} ms CPU per join**, ${fmt(h.serviceCores)} cores busy (generator ${fmt(h.generatorCores)}) → one core carries **${fmt(h.oneCoreJoinPerSecond, 0)} joins/s**; ${h.failures} failures | — (figure) | |`,
    );
  if (p2) rows.push(p2Row('P2', p2, true));
  if (r.p2Large) rows.push(p2Row('P2L', r.p2Large, true, p2));
  if (r.p2NoCap) rows.push(p2Row('P2′', r.p2NoCap, false));
  for (const [i, run] of (p3 ?? []).entries()) {
    const name = i === 0 ? 'P3' : 'P3′';
    const what =
      i === 0
        ? `median join delay after the service is reachable; ${run.nodes} nodes started ${fmt(run.headStartMs / 1000, 0)} s earlier, default backoff (${run.backoff.initialMs} ms … ${run.backoff.maxMs / 1000} s, full jitter)`
        : `same, backoff capped at ${run.backoff.maxMs / 1000} s (what-if, see analysis)`;
    rows.push(
      `| ${name} | ${what} | median **${fmt(run.medianDelaySeconds)} s** (p90 ${fmt(run.p90DelaySeconds)} s, max ${fmt(run.maxDelaySeconds)} s; ${run.joined}/${run.nodes} joined) | ≤ 2 s | ${i === 0 ? verdict(run.medianDelaySeconds <= 2) : run.medianDelaySeconds <= 2 ? 'would meet' : 'would miss'} |`,
    );
  }
  if (p4) {
    rows.push(
      `| P4 | join service start-to-listening ÷ \`node -e 0\` (medians of ${p4.runs}) | ${fmt(p4.serviceMs, 0)} ms ÷ ${fmt(p4.nodeMs, 0)} ms = **${fmt(p4.ratio)}** (benchmark program, simulated Kubernetes)${p4.cliMs !== undefined ? `; production CLI \`confboot join-service\`: ${fmt(p4.cliMs, 0)} ms = **${fmt(p4.cliRatio)}**` : ''} | ≤ 2.5 | ${verdict(Math.max(p4.ratio, p4.cliRatio ?? 0) <= 2.5)} |`,
    );
  }
  for (const extra of Object.values(r.extraRows ?? {})) rows.push(extra.row);
  const p8 = p8Rows(r);
  if (p8) rows.push(p8.row);
  if (p5)
    rows.push(
      `| P5 | one vTPM validation ÷ raw crypto floor (RSA-2048 verify + hashing) | ${fmt(p5.validationUs, 1)} µs ÷ ${fmt(p5.floorUs, 1)} µs = **${fmt(p5.ratio)}** | ≤ 3 | ${verdict(p5.ratio <= 3)} |`,
    );
  const p6 = r.p6;
  if (p6)
    rows.push(
      `| P6 | honest join latency with ${p6.held} silent connections held (10 from each of 100 addresses, half silent TCP, half silent after TLS) ÷ without, ${p6.joins} sequential joins each | p50 ${fmt(p6.attackP50Ms, 1)} ms ÷ ${fmt(p6.baselineP50Ms, 1)} ms = **${fmt(p6.p50Ratio)}**; p99 ${fmt(p6.attackP99Ms, 1)} ms ÷ ${fmt(p6.baselineP99Ms, 1)} ms = **${fmt(p6.p99Ratio)}**; ${p6.failures} failed | ≤ 2 | ${verdict(p6.failures === 0 && Math.max(p6.p50Ratio, p6.p99Ratio) <= 2)} |`,
    );
  const details: string[] = [];
  if (p1 && (p1.joinFailures > 0 || p1.mtlsFailures > 0))
    details.push(
      `- P1 failures: join ${p1.joinFailures}, mTLS ${p1.mtlsFailures}; first: ${p1.firstFailure ?? ''}`,
    );
  if (p1)
    details.push(
      `- P1 calls measured: ${p1.joinCalls} joins and ${p1.mtlsCalls} mTLS calls in ${p1.rounds} interleaved rounds of ${p1.roundMs / 1000} s per side.`,
    );
  for (const extra of Object.values(r.extraRows ?? {})) details.push(...(extra.details ?? []));
  if (p8) details.push(...p8.details);
  for (const [name, run] of [
    ['P2', p2],
    ['P2L', r.p2Large],
    ['P2′', r.p2NoCap],
  ] as const) {
    if (!run) continue;
    details.push(
      `- ${name} service-side means (its /metrics): attestation validation ${fmt(run.serviceValidationMeanMs)} ms, ticket handling after attestation ${fmt(run.serviceRequestMeanMs)} ms; ${run.auditedIssued} "issued" audit events for ${run.successes} successes.`,
    );
    details.push(
      `- ${name} attempts: ${run.attempts} join-ticket calls for ${run.nodes} nodes; ${run.refusedFirstAttempts} nodes failed their first attempt and retried with the join flow's backoff.`,
    );
    for (const [reason, count] of Object.entries(run.attemptFailureReasons))
      details.push(`- ${name} failed attempts ×${count}: ${reason}`);
  }
  for (const run of p3 ?? [])
    details.push(
      `- P3 (backoff ≤ ${run.backoff.maxMs / 1000} s): ${fmt(run.meanAttempts, 1)} join-ticket calls per node on average.`,
    );

  const stageRows = (r.stages ?? []).map(
    (st) =>
      `| ${st.side} | ${st.stage}${st.floor ? ' (P8 floor)' : ''} | ${st.perJoin} | ${fmt(st.us / 1000, 3)} | ${st.busyUs === undefined ? 'n/a' : fmt(st.busyUs / 1000, 3)} | ${st.cpuUs === undefined ? 'n/a' : fmt(st.cpuUs / 1000, 3)} |`,
  );
  const analysis = readFileSync(join(import.meta.dirname, 'analysis.md'), 'utf8').trim();
  return [
    '# Benchmarks',
    '',
    'Written by `npm run bench` (scripts/bench.mjs → bench/*.bench-run.ts); raw numbers in `bench/results.json`.',
    'Every figure is measured in one run, side by side with its baseline. Do not edit the table by hand;',
    'the analysis below the table comes from `bench/analysis.md`.',
    '',
    '## Machine',
    '',
    `- CPU: ${m.cpuModel}, ${m.cores} cores; ${m.memoryGB} GB RAM; Linux ${m.kernel}; ${runtimeOf(m)}`,
    `- Date: ${m.date}; run took ${fmt(m.durationSeconds, 0)} s`,
    `- Load average (1/5/15 min) at start ${m.loadAverageStart.join(' / ')}, at end ${m.loadAverageEnd.join(' / ')} — the machine is shared, so absolute rates are noisy; the ratios compare runs made side by side.`,
    `- Parameters: ${Object.entries(r.parameters)
      .map(([k, v]) => `${k}=${v}`)
      .join(', ')}`,
    '',
    '## Results',
    '',
    '| | What | Measured | Target | |',
    '|---|---|---|---|---|',
    ...rows,
    '',
    ...details,
    '',
    ...renderCompare(r),
    ...(stageRows.length > 0
      ? [
          '## Stage costs (this run)',
          '',
          'One operation after another in the benchmark process, with the adapters the service uses (bench/stages.ts); they explain P1 and P2, they are not targets.',
          '',
          '| Where | Stage | Times per join | ms per operation | ms event loop busy | ms CPU |',
          '|---|---|---|---|---|---|',
          ...stageRows,
          '',
        ]
      : []),
    analysis,
    '',
  ].join('\n');
}
