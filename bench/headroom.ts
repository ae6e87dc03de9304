/**
 * Headroom (issue 15): P1's join side with the join service alone in its own process (the bundled
 * benchmark program, bench/join-service-process.ts) and the load generator — the same real join
 * clients and soft-TPM nodes as P1, at the same concurrency — in this process. The service's own CPU
 * comes from its /metrics (prom-client's process_cpu_seconds_total, i.e. process.cpuUsage), so the
 * result shows how much of one core a join costs the service and how many joins per second one
 * core could carry.
 */
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { readThreads, spawnJoinService, threadCpuBetween } from './child.js';
import { akPool, type BenchCluster, joinClient, nodeIssuer, requestCycle } from './fixture.js';
import { metricsText, metricValue } from './p2-burst.js';

/** Result of {@link benchHeadroom}. */
export interface HeadroomResult {
  concurrency: number;
  seconds: number;
  joins: number;
  failures: number;
  joinPerSecond: number;
  /** Service CPU ÷ wall time over the run (1 = one core busy throughout). */
  serviceCores: number;
  serviceCpuMsPerJoin: number;
  /** Joins per second one core would carry at this CPU cost (1000 ÷ serviceCpuMsPerJoin). */
  oneCoreJoinPerSecond: number;
  /** This process's (the generator's) CPU ÷ wall time. */
  generatorCores: number;
  /**
   * The service's stage histograms over the timed loop (its /metrics, wall time per operation):
   * attestation validation inside attested TLS, and ticket handling once attested (CSR inspection,
   * signature, key service calls, ticket).
   */
  validationMeanMs: number;
  requestMeanMs: number;
  /**
   * A short pass with one client after the timed loop: nothing waits for the CPU inside the service,
   * so its histograms' wall times approach each stage's own cost (the ticket handling still waits
   * for the key service and the CA worker thread).
   */
  sequential: { joins: number; serviceCpuMsPerJoin: number; validationMeanMs: number; requestMeanMs: number };
  /**
   * The service's CPU per join over the timed loop by thread (/proc/<pid>/task, 10 ms ticks): the
   * event loop (`MainThread`), the CA worker (`WorkerThread`), V8's helper threads (`V8Worker`:
   * concurrent GC and compilation for both), the libuv pool; empty without /proc.
   */
  threadsMsPerJoin: Record<string, number>;
}

const VALIDATION = ['confboot_attestation_validation_seconds', '{variant="qemu-vtpm",outcome="ok"}'] as const;
const REQUEST = [
  'confboot_join_request_duration_seconds',
  '{rpc="IssueJoinTicket",outcome="issued"}',
] as const;

/** CPU seconds and the sum and count of both stage histograms, from the service's /metrics. */
async function snapshot(httpPort: number | undefined) {
  const text = await metricsText(httpPort);
  const hist = ([name, labels]: readonly [string, string]) => ({
    sum: metricValue(text, `${name}_sum`, labels),
    count: metricValue(text, `${name}_count`, labels),
  });
  return {
    cpu: metricValue(text, 'process_cpu_seconds_total'),
    validation: hist(VALIDATION),
    request: hist(REQUEST),
  };
}

type Hist = { sum: number; count: number };
const meanMs = (after: Hist, before: Hist) =>
  ((after.sum - before.sum) * 1000) / Math.max(1, after.count - before.count);

/** Runs the closed loop for `ms` at `concurrency` against a service child process. */
export async function benchHeadroom(
  cluster: BenchCluster,
  logDir: string,
  options: { concurrency: number; ms: number; serviceNode?: string },
): Promise<HeadroomResult> {
  const { concurrency, ms, serviceNode } = options;
  const keys = akPool(Math.min(concurrency, 8));
  const clients = Array.from({ length: concurrency }, (_, i) =>
    joinClient(nodeIssuer(keys[i % keys.length] as (typeof keys)[number], cluster.pcrs)),
  );
  const nextRequest = await requestCycle('bench-headroom');
  const service = spawnJoinService(
    cluster.serviceConfig(0),
    join(logDir, 'headroom-join-service.log'),
    serviceNode,
  );
  try {
    const { grpcPort, httpPort } = await service.listening;
    const endpoint = `127.0.0.1:${grpcPort}`;
    const loop = async (until: number, workers = clients.length) => {
      let joins = 0;
      let failures = 0;
      await Promise.all(
        clients.slice(0, workers).map(async (client) => {
          while (performance.now() < until) {
            try {
              await client.issueJoinTicket(endpoint, nextRequest());
              joins++;
            } catch {
              failures++;
            }
          }
        }),
      );
      return { joins, failures };
    };
    // Warm-up (module loading, JIT, identities), not counted.
    await loop(performance.now() + Math.min(1_000, ms));
    const before = await snapshot(httpPort);
    const threadsBefore = readThreads(service.child.pid);
    const genBefore = process.cpuUsage();
    const started = performance.now();
    const { joins, failures } = await loop(started + ms);
    const seconds = (performance.now() - started) / 1000;
    const gen = process.cpuUsage(genBefore);
    const threadsAfter = readThreads(service.child.pid);
    const after = await snapshot(httpPort);
    const cpu = after.cpu - before.cpu;
    const seq = await loop(performance.now() + Math.max(1_000, ms / 4), 1);
    const last = await snapshot(httpPort);
    const serviceCpuMsPerJoin = (cpu * 1000) / Math.max(1, joins);
    return {
      concurrency,
      seconds,
      joins,
      failures,
      joinPerSecond: joins / seconds,
      serviceCores: cpu / seconds,
      serviceCpuMsPerJoin,
      oneCoreJoinPerSecond: 1000 / serviceCpuMsPerJoin,
      generatorCores: (gen.user + gen.system) / 1e6 / seconds,
      validationMeanMs: meanMs(after.validation, before.validation),
      requestMeanMs: meanMs(after.request, before.request),
      sequential: {
        joins: seq.joins,
        serviceCpuMsPerJoin: ((last.cpu - after.cpu) * 1000) / Math.max(1, seq.joins),
        validationMeanMs: meanMs(last.validation, after.validation),
        requestMeanMs: meanMs(last.request, after.request),
      },
      threadsMsPerJoin: Object.fromEntries(
        Object.entries(threadCpuBetween(service.child.pid, threadsBefore, threadsAfter)).map(([name, s]) => [
          name,
          (s * 1000) / Math.max(1, joins),
        ]),
      ),
    };
  } finally {
    await service.stop();
  }
}
