/**
 * P2 (issue 7): a burst of N simulated nodes against ONE join-service process. The service is the
 * child process of bench/join-service-process.ts (so its peak RSS is its own, read from VmHWM); the
 * nodes live in this process: each has a soft TPM (genuine TPM quote structures, so the service
 * runs the full qemu-vtpm verification), a kubelet CSR made before the burst (a node makes it on
 * its own CPU), and the real GrpcJoinTicketClient with production bounds (30 s). All N nodes start
 * at once. A refused attempt (the service answers ResourceExhausted beyond its concurrency cap, by
 * design: "nothing queues, the joining node's backoff retries") is retried after the JoinFlow's own
 * backoff (fullJitterDelayMs with DEFAULT_JOIN_BACKOFF, the same CSR); refusals are counted. A node
 * fails when it has no ticket {@link P2_BOUND_MS} after the burst started. Latency is burst start →
 * the node's ticket. The node side (TLS identity, quote signature, handshake) shares this machine's
 * 2 cores with the service.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { DEFAULT_MAX_CONCURRENT } from '../src/app/join-service/service.js';
import { fullJitterDelayMs } from '../src/domain/backoff.js';
import { DEFAULT_JOIN_BACKOFF } from '../src/domain/join-flow.js';
import type { JoinTicketRequest } from '../src/ports/types.js';
import { loopbackAddresses } from '../test/attack/support/slowloris.js';
import { spawnJoinService } from './child.js';
import { akPool, type BenchCluster, joinClient, joinRequest, nodeIssuer, quantile } from './fixture.js';

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
  /** This process's CPU (the simulated nodes) across the burst ÷ its wall time. */
  nodesCores: number;
}

export function metricValue(text: string, name: string, labels = ''): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels}`) || l.startsWith(`${name} `));
  return line ? Number(line.slice(line.lastIndexOf(' ') + 1)) : Number.NaN;
}

function shortReason(err: unknown): string {
  const msg = err instanceof Error ? err.message : String(err);
  // Group alike reasons: no addresses, ports or timestamps, and grpc-js's per-call deadline
  // details cut off.
  return msg
    .replace(/127\.\d+\.\d+\.\d+:\d+/g, '<endpoint>')
    .replace(/\(\d{4}-\d\d-\d\dT[^)]*\)/g, '(<time>)')
    .replace(/(Deadline exceeded after) .*/, '$1 the call timeout')
    .replace(/\d+(\.\d+)? ?ms/g, 'N ms')
    .slice(0, 160);
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
  options: { maxConcurrent?: number; label: string } = { label: 'default' },
): Promise<P2Result> {
  const keys = akPool(16);
  const prepared: Array<{ request: JoinTicketRequest; client: ReturnType<typeof joinClient> }> = [];
  // Each node connects from its own loopback address, as real nodes have their own IPs: the service's
  // per-source admission cap would otherwise refuse a burst that all comes from 127.0.0.1.
  const addresses = loopbackAddresses(nodes);
  for (let i = 0; i < nodes; i++) {
    prepared.push({
      request: await joinRequest(`bench-p2-${i}`, addresses[i]),
      client: joinClient(
        nodeIssuer(keys[i % keys.length] as (typeof keys)[number], cluster.pcrs),
        addresses[i],
      ),
    });
  }
  const logPath = join(logDir, `p2-${options.label}-join-service.log`);
  const service = spawnJoinService(
    {
      ...cluster.serviceConfig(0),
      ...(options.maxConcurrent !== undefined ? { maxConcurrent: options.maxConcurrent } : {}),
    },
    logPath,
  );
  try {
    const { grpcPort, httpPort } = await service.listening;
    const endpoint = `127.0.0.1:${grpcPort}`;
    // One join before the burst, so the burst does not measure the first call's module loading.
    const warm = await joinRequest('bench-p2-warmup', addresses[0]);
    await (
      prepared[0]?.client ?? joinClient(nodeIssuer(keys[0] as (typeof keys)[number], cluster.pcrs))
    ).issueJoinTicket(endpoint, warm);
    const latencies: number[] = [];
    const attemptFailureReasons: Record<string, number> = {};
    let attempts = 0;
    let refusedFirstAttempts = 0;
    const random = { float: () => Math.random() };
    const bound = boundMs(nodes);
    const cpuBefore = await serviceCpuSeconds(httpPort);
    const nodesCpuBefore = process.cpuUsage();
    const started = performance.now();
    await Promise.all(
      prepared.map(async ({ request, client }) => {
        for (let attempt = 0; ; attempt++) {
          attempts++;
          try {
            await client.issueJoinTicket(endpoint, request);
            latencies.push((performance.now() - started) / 1000);
            return;
          } catch (err) {
            const r = shortReason(err);
            attemptFailureReasons[r] = (attemptFailureReasons[r] ?? 0) + 1;
            if (attempt === 0) refusedFirstAttempts++;
          }
          const delay = fullJitterDelayMs(attempt, DEFAULT_JOIN_BACKOFF, random);
          if (performance.now() + delay - started > bound) return;
          await new Promise((r) => setTimeout(r, delay));
        }
      }),
    );
    const wallSeconds = (performance.now() - started) / 1000;
    const nodesCpu = process.cpuUsage(nodesCpuBefore);
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
      nodesCores: (nodesCpu.user + nodesCpu.system) / 1e6 / wallSeconds,
    };
  } finally {
    await service.stop();
  }
}
