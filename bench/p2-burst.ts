/**
 * P2 (issue 7): a burst of N simulated nodes against ONE join-service process. The service is the
 * child process of bench/join-service-process.ts (so its peak RSS is its own, read from VmHWM); the
 * nodes live in this process or, split evenly, in `generators` load-generator child processes
 * (bench/p2-generator.ts; one JavaScript thread each, so a burst whose node side needs more than one
 * core is not limited by the generator), released together. Each node has a soft TPM (genuine TPM quote structures, so the service
 * runs the full qemu-vtpm verification), a kubelet CSR made before the burst (a node makes it on
 * its own CPU), and the real GrpcJoinTicketClient with production bounds (30 s). All N nodes start
 * at once. A refused attempt (the service answers ResourceExhausted beyond its concurrency cap, by
 * design: "nothing queues, the joining node's backoff retries") is retried after the JoinFlow's own
 * backoff (fullJitterDelayMs with DEFAULT_JOIN_BACKOFF, the same CSR); refusals are counted. A node
 * fails when it has no ticket {@link P2_BOUND_MS} after the burst started. Latency is burst start →
 * the node's ticket (each generator from its own start). The node side (TLS identity, quote
 * signature, handshake) shares this machine's 2 cores with the service.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { DEFAULT_MAX_CONCURRENT } from '../src/app/join-service/service.js';
import { loopbackAddresses } from '../test/attack/support/slowloris.js';
import { buildDir, spawnJoinService } from './child.js';
import { type BenchCluster, quantile } from './fixture.js';
import type { GeneratorConfig } from './p2-generator.js';
import { type NodesOutcome, prepareNodes, runNodes } from './p2-nodes.js';

/**
 * A node without a ticket this long after the burst started has failed: 4× the 15 s target for
 * 1,000 nodes, growing in proportion above (60 s per 1,000 nodes).
 */
export const P2_BOUND_MS = 60_000;
const boundMs = (nodes: number) => Math.max(P2_BOUND_MS, (P2_BOUND_MS * nodes) / 1000);

/** Result of {@link benchP2}. */
export interface P2Result {
  nodes: number;
  /** The service's concurrency cap (64 = its default; 0 = none). */
  maxConcurrent: number;
  successes: number;
  /** Nodes without a ticket after {@link P2_BOUND_MS}. */
  failures: number;
  /** Join-ticket calls made (first attempts and retries). */
  attempts: number;
  /** Nodes whose first attempt was refused. */
  refusedFirstAttempts: number;
  /** Reasons of failed attempts → count (retried unless the node ran out of time). */
  attemptFailureReasons: Record<string, number>;
  wallSeconds: number;
  p50Seconds: number;
  p99Seconds: number;
  maxSeconds: number;
  peakRssMB: number;
  /** Service-side means from its /metrics: validation and ticket handling (after attestation). */
  serviceValidationMeanMs: number;
  serviceRequestMeanMs: number;
  /** Audit events with outcome "issued" in the service log. */
  auditedIssued: number;
  /**
   * Service CPU (user + system, its process_cpu_seconds_total from process.cpuUsage) across the
   * burst, divided by the tickets issued in it.
   */
  serviceCpuMsPerJoin: number;
  /** Service CPU across the burst ÷ its wall time (1 = one core busy the whole burst). */
  serviceCores: number;
  /** The simulated nodes' CPU (every generator process) across the burst ÷ its wall time. */
  nodesCores: number;
  /** Load-generator processes the nodes were split over (1 = this process). */
  generators?: number;
}

/** A load-generator child process (bench/p2-generator.ts). */
interface LoadGenerator {
  /** Resolves once its nodes are prepared. */
  ready: Promise<void>;
  /** Starts its burst; resolves with its outcome. */
  go(): Promise<NodesOutcome>;
  kill(): void;
}

/** Spawns a generator with `config`; its lines are bounded by the burst's bound plus 5 minutes. */
function startGenerator(config: GeneratorConfig): LoadGenerator {
  const child = spawn(process.execPath, [join(buildDir(), 'bench', 'p2-generator.js')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const waiting: Array<(msg: Record<string, unknown>) => void> = [];
  lines.on('line', (line) => {
    try {
      const msg = JSON.parse(line) as Record<string, unknown>;
      waiting.shift()?.(msg);
    } catch {
      // Not our line.
    }
  });
  const next = () =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('p2 generator: no answer')), config.boundMs + 300_000);
      child.once('exit', (code) => reject(new Error(`p2 generator exited with ${code}`)));
      waiting.push((msg) => {
        clearTimeout(timer);
        resolve(msg);
      });
    });
  const ready = next().then(() => undefined);
  ready.catch(() => {});
  child.stdin.write(`${JSON.stringify(config)}\n`);
  return {
    ready,
    async go() {
      const done = next();
      child.stdin.write('go\n');
      return (await done).outcome as NodesOutcome;
    },
    kill: () => child.kill(),
  };
}

export function metricValue(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels}`) || l.startsWith(`${name} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : Number.NaN;
}

/** The service's /metrics text, or '' when it does not answer within 30 s (a swamped service). */
export async function metricsText(httpPort: number | undefined): Promise<string> {
  try {
    return await fetch(`http://127.0.0.1:${httpPort}/metrics`, { signal: AbortSignal.timeout(30_000) }).then(
      (r) => r.text(),
    );
  } catch {
    return '';
  }
}

/**
 * The service's CPU seconds so far (prom-client's process_cpu_seconds_total on its /metrics); NaN
 * when /metrics does not answer.
 */
export async function serviceCpuSeconds(httpPort: number | undefined): Promise<number> {
  return metricValue(await metricsText(httpPort), 'process_cpu_seconds_total');
}

/** Runs P2 with `nodes` nodes; `logDir` receives the service's log. */
export async function benchP2(
  cluster: BenchCluster,
  logDir: string,
  nodes: number,
  options: { maxConcurrent?: number; label: string; generators?: number } = { label: 'default' },
): Promise<P2Result> {
  // Each node connects from its own loopback address, as real nodes have their own IPs: the service's
  // per-source admission cap would otherwise refuse a burst that all comes from 127.0.0.1.
  const addresses = loopbackAddresses(nodes);
  const bound = boundMs(nodes);
  const generatorCount = Math.max(1, Math.min(options.generators ?? 1, nodes));
  // One generator: the nodes live in this process. Several: child processes, each with a share.
  const prepared = generatorCount === 1 ? await prepareNodes(addresses, cluster.pcrs, 'bench-p2') : [];
  const logPath = join(logDir, `p2-${options.label}-join-service.log`);
  const service = spawnJoinService(
    {
      ...cluster.serviceConfig(0),
      ...(options.maxConcurrent !== undefined ? { maxConcurrent: options.maxConcurrent } : {}),
    },
    logPath,
  );
  const generators: LoadGenerator[] = [];
  try {
    const { grpcPort, httpPort } = await service.listening;
    const endpoint = `127.0.0.1:${grpcPort}`;
    if (generatorCount > 1) {
      const share = Math.ceil(nodes / generatorCount);
      for (let g = 0; g < generatorCount; g++)
        generators.push(
          startGenerator({
            endpoint,
            addresses: addresses.slice(g * share, (g + 1) * share),
            pcrs: Object.fromEntries(
              [...cluster.pcrs].map(([i, v]) => [String(i), Buffer.from(v).toString('hex')]),
            ),
            namePrefix: `bench-p2-g${g}`,
            boundMs: bound,
          }),
        );
      await Promise.all(generators.map((g) => g.ready));
    }
    // One join before the burst, so the burst does not measure the first call's module loading.
    const [warm] = await prepareNodes(addresses.slice(0, 1), cluster.pcrs, 'bench-p2-warmup');
    await warm?.client.issueJoinTicket(endpoint, warm.request);
    const cpuBefore = await serviceCpuSeconds(httpPort);
    const started = performance.now();
    const outcomes =
      generatorCount === 1
        ? [await runNodes(prepared, endpoint, bound)]
        : await Promise.all(generators.map((g) => g.go()));
    const latencies = outcomes.flatMap((o) => o.latencies);
    const attempts = outcomes.reduce((a, o) => a + o.attempts, 0);
    const refusedFirstAttempts = outcomes.reduce((a, o) => a + o.refusedFirstAttempts, 0);
    const attemptFailureReasons: Record<string, number> = {};
    for (const o of outcomes)
      for (const [r, n] of Object.entries(o.attemptFailureReasons))
        attemptFailureReasons[r] = (attemptFailureReasons[r] ?? 0) + n;
    const nodesCpuSeconds = outcomes.reduce((a, o) => a + o.cpuSeconds, 0);
    const wallSeconds = (performance.now() - started) / 1000;
    const cpuAfter = await serviceCpuSeconds(httpPort);
    const peakRss = service.peakRssBytes();
    const metrics = await metricsText(httpPort);
    const vSum = metricValue(
      metrics,
      'confboot_attestation_validation_seconds_sum',
      '{variant="qemu-vtpm",outcome="ok"}',
    );
    const vCount = metricValue(
      metrics,
      'confboot_attestation_validation_seconds_count',
      '{variant="qemu-vtpm",outcome="ok"}',
    );
    const rSum = metricValue(
      metrics,
      'confboot_join_request_duration_seconds_sum',
      '{rpc="IssueJoinTicket",outcome="issued"}',
    );
    const rCount = metricValue(
      metrics,
      'confboot_join_request_duration_seconds_count',
      '{rpc="IssueJoinTicket",outcome="issued"}',
    );
    await service.stop();
    const auditedIssued = readFileSync(logPath, 'utf8')
      .split('\n')
      .filter((l) => l.includes('"event":"join-audit"') && l.includes('"outcome":"issued"')).length;
    return {
      nodes,
      maxConcurrent: options.maxConcurrent ?? DEFAULT_MAX_CONCURRENT,
      successes: latencies.length,
      failures: nodes - latencies.length,
      attempts,
      refusedFirstAttempts,
      attemptFailureReasons,
      wallSeconds,
      p50Seconds: quantile(latencies, 0.5),
      p99Seconds: quantile(latencies, 0.99),
      maxSeconds: quantile(latencies, 1),
      peakRssMB: peakRss / (1024 * 1024),
      serviceValidationMeanMs: (vSum / vCount) * 1000,
      serviceRequestMeanMs: (rSum / rCount) * 1000,
      // The warm-up join is audited too.
      auditedIssued: auditedIssued - 1,
      serviceCpuMsPerJoin: ((cpuAfter - cpuBefore) * 1000) / Math.max(1, latencies.length),
      serviceCores: (cpuAfter - cpuBefore) / wallSeconds,
      nodesCores: nodesCpuSeconds / wallSeconds,
      generators: generatorCount,
    };
  } finally {
    for (const g of generators) g.kill();
    await service.stop();
  }
}
