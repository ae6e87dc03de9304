/**
 * The node side of P2 (bench/, outside the product): prepares simulated nodes (soft TPM, kubelet CSR,
 * the real join client, each from its own loopback address) and runs their burst against an
 * endpoint, retrying a failed attempt after the join flow's own backoff. Used in the benchmark process
 * (one generator) and in each load-generator child process (bench/p2-generator.ts) when P2 splits
 * its nodes over several.
 */
import { performance } from 'node:perf_hooks';
import { fullJitterDelayMs } from '../src/domain/backoff.js';
import { DEFAULT_JOIN_BACKOFF } from '../src/domain/join-flow.js';
import type { JoinTicketRequest } from '../src/ports/types.js';
import { akPool, joinClient, joinRequest, nodeIssuer } from './fixture.js';

/** Prepared nodes. */
export type PreparedNodes = Array<{ request: JoinTicketRequest; client: ReturnType<typeof joinClient> }>;

/** What one generator's nodes did in a burst. */
export interface NodesOutcome {
  /** Seconds from the burst's start to each node's ticket. */
  latencies: number[];
  attempts: number;
  refusedFirstAttempts: number;
  attemptFailureReasons: Record<string, number>;
  /** This process's CPU (user + system) across the burst, seconds. */
  cpuSeconds: number;
}

/** Prepares one simulated node per address (`pcrs` = the expected PCR values). */
export async function prepareNodes(
  addresses: string[],
  pcrs: Map<number, Uint8Array>,
  namePrefix: string,
): Promise<PreparedNodes> {
  const keys = akPool(Math.min(16, Math.max(1, addresses.length)));
  const prepared: PreparedNodes = [];
  for (const [i, address] of addresses.entries()) {
    prepared.push({
      request: await joinRequest(`${namePrefix}-${i}`, address),
      client: joinClient(nodeIssuer(keys[i % keys.length] as (typeof keys)[number], pcrs), address),
    });
  }
  return prepared;
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

/** Runs the burst of `prepared` against `endpoint`; a node gives up `boundMs` after the start. */
export async function runNodes(
  prepared: PreparedNodes,
  endpoint: string,
  boundMs: number,
): Promise<NodesOutcome> {
  const latencies: number[] = [];
  const attemptFailureReasons: Record<string, number> = {};
  let attempts = 0;
  let refusedFirstAttempts = 0;
  const random = { float: () => Math.random() };
  const cpuBefore = process.cpuUsage();
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
        if (performance.now() + delay - started > boundMs) return;
        await new Promise((r) => setTimeout(r, delay));
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  return {
    latencies,
    attempts,
    refusedFirstAttempts,
    attemptFailureReasons,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
  };
}
