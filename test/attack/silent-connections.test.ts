/**
 * Attack family: silent connections (slowloris) and connection floods against the real join
 * service. An attacker in its own thread holds N silent connections — TCP with no byte sent, a TLS
 * ClientHello and then nothing, or a complete TLS handshake and then nothing — from one loopback
 * address or from 100, and re-opens at once every connection the service closes or refuses. While
 * it is doing so, an honest node (real swtpm quote, real attested TLS, worker-0 on 127.0.0.1) asks
 * for a join ticket. Asserted as orderings and counts, never as durations:
 * - the honest node gets its ticket on its first connection while the attack is still running
 *   (the attacker stops only afterwards, and still holds its connections at that moment);
 * - with phase deadlines far longer than the test (60 s), no deadline fired before the ticket: the
 *   honest node never waited for an attacker's connection to expire;
 * - the service counts what it refused in /metrics by reason (per-source cap for the one-address
 *   attacker), and writes drop log lines as summaries, not one per connection.
 * Flood: after 2,000 connections were opened and closed, the next honest join succeeds on its first
 * connection, before any (short, 2 s) phase deadline fired.
 * Phase deadlines: with short deadlines, each silent stage is dropped with its own reason.
 */
import { status } from '@grpc/grpc-js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_MAX_PER_SOURCE } from '../../src/adapters/grpc/atls/admission-settings.js';
import { attempt } from './support/attack.js';
import type { SwtpmNode } from './support/nodes.js';
import { startSwtpmNode } from './support/nodes.js';
import { loopbackAddresses, type SilentStage, type Slowloris, startSlowloris } from './support/slowloris.js';
import { startTarget, type Target, type TargetOptions } from './support/target.js';

const LONG = 60_000;
/** Bound on one case: 1,000 TLS handshakes (each with a fresh server identity) on 2 loaded cores. */
const TEST_TIMEOUT_MS = 180_000;
/** Deadlines that cannot fire during a test: a ticket before any of them proves no waiting. */
const longDeadlines: TargetOptions = {
  handshakeTimeoutMs: LONG,
  limits: {
    deadlines: {
      clientHelloMs: LONG,
      tlsHandshakeMs: LONG,
      attestationMs: LONG,
      verdictMs: LONG,
    },
  },
};

const DEADLINE_REASONS = [
  'client-hello-timeout',
  'tls-handshake-timeout',
  'attestation-timeout',
  'verdict-timeout',
  'handshake-timeout',
];

/** The single attacking address (outside the suite's nodes 127.0.0.1 and 127.0.0.2). */
const ONE_ADDRESS = '127.0.200.1';

let node: SwtpmNode;
const attackers: Slowloris[] = [];
const targets: Target[] = [];

beforeAll(async () => {
  node = await startSwtpmNode();
});
afterEach(async () => {
  await Promise.all(attackers.splice(0).map((a) => a.stop()));
  await Promise.all(targets.splice(0).map((t) => t.stop()));
});
afterAll(async () => {
  await node?.stop();
});

async function target(options: TargetOptions): Promise<Target> {
  const t = await startTarget(options);
  targets.push(t);
  return t;
}

/** The join service's /metrics, fetched over its operations HTTP port. */
async function scrape(t: Target): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${t.service.httpPort}/metrics`);
  return res.text();
}

/** confboot_atls_dropped_connections_total by reason. */
function drops(metrics: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metrics.matchAll(/^confboot_atls_dropped_connections_total\{reason="([^"]+)"\} (\d+)$/gm))
    out[m[1] as string] = Number(m[2]);
  return out;
}

function unattested(metrics: string, kind: 'connections' | 'sources'): number {
  const m = new RegExp(`^confboot_atls_unattested\\{kind="${kind}"\\} (\\d+)$`, 'm').exec(metrics);
  return m ? Number(m[1]) : Number.NaN;
}

function deadlineDrops(d: Record<string, number>): number {
  return DEADLINE_REASONS.reduce((n, r) => n + (d[r] ?? 0), 0);
}

/** Waits (bounded: 60 s) until the service holds at least `n` unattested connections. */
async function untilServiceHolds(t: Target, n: number): Promise<string> {
  const end = Date.now() + 60_000;
  for (;;) {
    const m = await scrape(t);
    if (unattested(m, 'connections') >= n) return m;
    if (Date.now() > end)
      throw new Error(`service holds ${unattested(m, 'connections')} of ${n} connections`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Scenario {
  name: string;
  addresses: string[];
  perAddress: number;
}

const scenarios: Scenario[] = [
  { name: '4 from one address', addresses: [ONE_ADDRESS], perAddress: 4 },
  { name: '64 from one address', addresses: [ONE_ADDRESS], perAddress: 64 },
  { name: '1,000 from one address', addresses: [ONE_ADDRESS], perAddress: 1000 },
  { name: '10 from each of 100 addresses', addresses: loopbackAddresses(100), perAddress: 10 },
];

describe('silent connections held by a slowloris do not delay an honest join', () => {
  for (const s of scenarios) {
    for (const stage of ['tcp', 'tls'] as SilentStage[]) {
      it(
        `${s.name}, ${stage === 'tcp' ? 'silent TCP' : 'silent after the TLS handshake'}: the honest node gets its ticket while the attack runs`,
        async () => {
          const t = await target(longDeadlines);
          const perSourceHeld = Math.min(s.perAddress, DEFAULT_MAX_PER_SOURCE);
          const expectedHeld = perSourceHeld * s.addresses.length;
          const attack = startSlowloris({
            port: t.port,
            stage,
            addresses: s.addresses,
            perAddress: s.perAddress,
          });
          attackers.push(attack);
          await attack.untilHeld(expectedHeld);
          await untilServiceHolds(t, expectedHeld);

          const order: string[] = [];
          const out = await attempt(t.endpoint, node.issuer);
          order.push('ticket');
          const atTicket = await attack.stats();
          const metricsAtTicket = await scrape(t);
          const final = await attack.stop();
          order.push('attack stopped');

          expect(out.code, out.details).toBe(status.OK);
          // One connection, one quote: no retry, no second attempt after a timeout.
          expect(out.peers).toHaveLength(1);
          expect(order).toEqual(['ticket', 'attack stopped']);
          expect(atTicket.running).toBe(true);
          expect(atTicket.held).toBeGreaterThanOrEqual(expectedHeld);
          expect(unattested(metricsAtTicket, 'connections')).toBeGreaterThanOrEqual(expectedHeld);
          const d = drops(metricsAtTicket);
          // No deadline fired before the ticket: the honest node waited for no attacker connection.
          expect(deadlineDrops(d)).toBe(0);
          if (s.perAddress > DEFAULT_MAX_PER_SOURCE) {
            // Over the per-source cap: refused before TLS, re-opened, refused again…
            expect(d['source-cap']).toBeGreaterThan(0);
            expect(final.opened).toBeGreaterThan(s.perAddress * s.addresses.length);
            // …and logged as summaries (one line per 10 s), not one line per refusal.
            const lines = t.logLines().filter((l) => String(l.msg).startsWith('Dropped or refused'));
            expect(lines.length).toBeLessThanOrEqual(1 + Math.ceil(LONG / 10_000));
            expect(lines.length).toBeLessThan(d['source-cap'] ?? 0);
          } else expect(d['source-cap'] ?? 0).toBe(0);
          // No per-connection audit or refusal line for the attacker's connections.
          expect(t.audits().filter((a) => a.outcome === 'refused')).toHaveLength(0);
        },
        TEST_TIMEOUT_MS,
      );
    }
  }

  it(
    '64 from one address that each sent a ClientHello and then nothing: the honest node gets its ticket while the attack runs',
    async () => {
      const t = await target(longDeadlines);
      const attack = startSlowloris({
        port: t.port,
        stage: 'hello',
        addresses: [ONE_ADDRESS],
        perAddress: 64,
      });
      attackers.push(attack);
      await attack.untilHeld(DEFAULT_MAX_PER_SOURCE);
      await untilServiceHolds(t, DEFAULT_MAX_PER_SOURCE);
      const out = await attempt(t.endpoint, node.issuer);
      const atTicket = await attack.stats();
      const d = drops(await scrape(t));
      await attack.stop();
      expect(out.code, out.details).toBe(status.OK);
      expect(out.peers).toHaveLength(1);
      expect(atTicket).toMatchObject({ running: true });
      expect(atTicket.held).toBeGreaterThanOrEqual(DEFAULT_MAX_PER_SOURCE);
      expect(deadlineDrops(d)).toBe(0);
    },
    TEST_TIMEOUT_MS,
  );

  it(
    'at the global cap the heaviest source loses its oldest connection, so a source with none (the honest node) still gets in',
    async () => {
      // 100 addresses × 10 against a global cap of 500: every source holds ~5, evictions keep it fair.
      const t = await target({
        ...longDeadlines,
        limits: { ...longDeadlines.limits, maxUnattested: 500 },
      });
      const attack = startSlowloris({
        port: t.port,
        stage: 'tcp',
        addresses: loopbackAddresses(100),
        perAddress: 10,
      });
      attackers.push(attack);
      await untilServiceHolds(t, 500);
      const out = await attempt(t.endpoint, node.issuer);
      const atTicket = await attack.stats();
      const d = drops(await scrape(t));
      await attack.stop();
      expect(out.code, out.details).toBe(status.OK);
      expect(out.peers).toHaveLength(1);
      expect(atTicket.running).toBe(true);
      expect((d.evicted ?? 0) + (d['global-cap'] ?? 0)).toBeGreaterThan(0);
      expect(deadlineDrops(d)).toBe(0);
    },
    TEST_TIMEOUT_MS,
  );
});

describe('connection flood', () => {
  it(
    'after 2,000 connections were opened and closed, the next honest join succeeds on its first connection, before any deadline fired',
    async () => {
      const short = 2_000;
      const t = await target({
        handshakeTimeoutMs: 10_000,
        limits: {
          deadlines: {
            clientHelloMs: short,
            tlsHandshakeMs: short,
            attestationMs: short,
            verdictMs: short,
          },
        },
      });
      const flood = startSlowloris({
        port: t.port,
        stage: 'tcp',
        addresses: loopbackAddresses(100),
        perAddress: 20,
        once: true,
      });
      attackers.push(flood);
      await flood.untilHeld(2000);
      const opened = await flood.stop();
      expect(opened.opened).toBe(2000);
      // On a loaded machine some flood connections may hit a deadline while the flood is still
      // opening the rest; those are counted before the honest join. Once the flood has closed every
      // connection, no deadline may fire until the honest node holds its ticket: had it waited for
      // capacity held by a leftover connection, that connection's deadline would show here.
      const before = deadlineDrops(drops(await scrape(t)));
      const out = await attempt(t.endpoint, node.issuer);
      const d = drops(await scrape(t));
      expect(out.code, out.details).toBe(status.OK);
      expect(out.peers).toHaveLength(1);
      expect(deadlineDrops(d)).toBe(before);
    },
    TEST_TIMEOUT_MS,
  );
});

describe('phase deadlines', () => {
  it(
    'each silent stage is dropped at its own deadline, counted by reason, and logged as a summary',
    async () => {
      const t = await target({
        handshakeTimeoutMs: 10_000,
        limits: {
          deadlines: { clientHelloMs: 300, tlsHandshakeMs: 300, attestationMs: 300, verdictMs: 300 },
          dropLogIntervalMs: 60_000,
        },
      });
      const stages: SilentStage[] = ['tcp', 'hello', 'tls'];
      for (const [i, stage] of stages.entries())
        attackers.push(
          startSlowloris({
            port: t.port,
            stage,
            addresses: [`127.0.201.${i + 1}`],
            perAddress: 5,
            once: true,
          }),
        );
      const want = { 'client-hello-timeout': 5, 'tls-handshake-timeout': 5, 'attestation-timeout': 5 };
      const end = Date.now() + 30_000;
      let d = drops(await scrape(t));
      while (Object.entries(want).some(([r, n]) => (d[r] ?? 0) < n) && Date.now() < end) {
        await new Promise((r) => setTimeout(r, 50));
        d = drops(await scrape(t));
      }
      expect(d).toMatchObject(want);
      expect(unattested(await scrape(t), 'connections')).toBe(0);
      // 15 drops, one summary line at most (the first), never one line per connection.
      const lines = t.logLines().filter((l) => String(l.msg).startsWith('Dropped or refused'));
      expect(lines.length).toBeLessThanOrEqual(1);
      expect(t.audits()).toHaveLength(0);
    },
    TEST_TIMEOUT_MS,
  );
});
