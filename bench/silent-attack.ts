/**
 * Benchmark P6 (issue 12): honest join latency while 1,000 silent connections are held, divided by
 * the same without the attack, in one run. The real join service (bench/service-wiring.ts) runs in
 * this process; the attacker (test/attack/support/slowloris.ts) runs in a worker thread and holds 10
 * connections from each of 100 loopback addresses — 5 silent TCP and 5 silent after a completed TLS
 * handshake — re-opening any the service closes. One honest node (soft TPM, the production join
 * client) joins sequentially: `joins` times without the attack, then `joins` times with it held.
 * Knob: CONFBOOT_BENCH_P6_JOINS (default 40).
 */
import { silentLogger } from '../src/adapters/log/pino-logger.js';
import { loopbackAddresses, startSlowloris } from '../test/attack/support/slowloris.js';
import { akPool, type BenchCluster, joinClient, joinRequest, nodeIssuer, quantile } from './fixture.js';
import { startBenchJoinService } from './service-wiring.js';

/** What P6 measured. */
export interface SilentAttackResult {
  joins: number;
  /** Silent connections the attacker held while the honest node joined. */
  held: number;
  baselineP50Ms: number;
  baselineP99Ms: number;
  attackP50Ms: number;
  attackP99Ms: number;
  p50Ratio: number;
  p99Ratio: number;
  /** Honest joins that failed (any phase). */
  failures: number;
  /** The distinct failure messages (at most 3). */
  failureReasons: string[];
}

async function timedJoins(
  client: ReturnType<typeof joinClient>,
  endpoint: string,
  n: number,
  reasons: Set<string>,
): Promise<{ ms: number[]; failures: number }> {
  const ms: number[] = [];
  let failures = 0;
  for (let i = 0; i < n; i++) {
    const request = await joinRequest(`worker-${i}`);
    const started = performance.now();
    try {
      await client.issueJoinTicket(endpoint, request);
      ms.push(performance.now() - started);
    } catch (err) {
      failures++;
      if (reasons.size < 3) reasons.add(err instanceof Error ? err.message : String(err));
    }
  }
  return { ms, failures };
}

/** Runs P6 against a fresh in-process join service. */
export async function benchSilentAttack(cluster: BenchCluster, joins: number): Promise<SilentAttackResult> {
  const service = await startBenchJoinService(cluster.serviceConfig(0), silentLogger);
  try {
    const endpoint = `127.0.0.1:${service.grpcPort}`;
    const [key] = akPool(1);
    const client = joinClient(nodeIssuer(key as NonNullable<typeof key>, cluster.pcrs));
    const reasons = new Set<string>();
    await timedJoins(client, endpoint, 5, reasons); // warm-up
    const baseline = await timedJoins(client, endpoint, joins, reasons);
    const addresses = loopbackAddresses(100);
    const attackers = [
      startSlowloris({ port: service.grpcPort, stage: 'tcp', addresses, perAddress: 5 }),
      startSlowloris({ port: service.grpcPort, stage: 'tls', addresses, perAddress: 5 }),
    ];
    let held = 0;
    let attack: { ms: number[]; failures: number };
    try {
      const [a, b] = await Promise.all(attackers.map((x) => x.untilHeld(500, 120_000)));
      held = (a?.held ?? 0) + (b?.held ?? 0);
      attack = await timedJoins(client, endpoint, joins, reasons);
    } finally {
      await Promise.all(attackers.map((x) => x.stop()));
    }
    const r = {
      baselineP50Ms: quantile(baseline.ms, 0.5),
      baselineP99Ms: quantile(baseline.ms, 0.99),
      attackP50Ms: quantile(attack.ms, 0.5),
      attackP99Ms: quantile(attack.ms, 0.99),
    };
    return {
      joins,
      held,
      ...r,
      p50Ratio: r.attackP50Ms / r.baselineP50Ms,
      p99Ratio: r.attackP99Ms / r.baselineP99Ms,
      failures: baseline.failures + attack.failures,
      failureReasons: [...reasons],
    };
  } finally {
    await service.close();
  }
}
