/** The join service's Prometheus metrics, read back from the text exposition. */
import perfHooks from 'node:perf_hooks';
import { describe, expect, it, vi } from 'vitest';
import { EVENT_LOOP_SAMPLE_MS, JoinServiceMetrics } from '../../../src/adapters/ops/metrics.js';

/** The value of one sample line `name{labels} value` in `text`, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('JoinServiceMetrics', () => {
  it('counts requests by rpc, outcome, variant and reason', async () => {
    const m = new JoinServiceMetrics({ processMetrics: false });
    const labels = {
      rpc: 'IssueJoinTicket',
      outcome: 'refused',
      variant: 'qemu-vtpm',
      reason: 'deny-list',
    } as const;
    m.countRequest(labels);
    m.countRequest(labels);
    m.countRequest({ ...labels, outcome: 'issued', reason: 'ok' });
    const text = await m.render();
    expect(
      sample(
        text,
        'confboot_join_requests_total{rpc="IssueJoinTicket",outcome="refused",variant="qemu-vtpm",reason="deny-list"}',
      ),
    ).toBe(2);
    expect(
      sample(
        text,
        'confboot_join_requests_total{rpc="IssueJoinTicket",outcome="issued",variant="qemu-vtpm",reason="ok"}',
      ),
    ).toBe(1);
  });

  it('counts a reason outside the set as internal (the label set stays bounded)', async () => {
    const m = new JoinServiceMetrics({ processMetrics: false });
    const labels = { rpc: 'IssueJoinTicket', outcome: 'refused', variant: 'qemu-vtpm' } as const;
    m.countRequest({ ...labels, reason: 'caller text: /etc/passwd' as never });
    const values = (await m.joins.get()).values;
    expect(values.map((v) => [v.labels.reason, v.value])).toEqual([['internal', 1]]);
  });

  it('records durations in the request histogram and moves the in-flight gauge', async () => {
    const m = new JoinServiceMetrics({ processMetrics: false });
    m.observeSeconds({ rpc: 'IssueRejoinTicket', outcome: 'issued' }, 0.003);
    m.running(1);
    m.running(1);
    m.running(-1);
    const text = await m.render();
    const bucket = (le: string) =>
      sample(
        text,
        `confboot_join_request_duration_seconds_bucket{le="${le}",rpc="IssueRejoinTicket",outcome="issued"}`,
      );
    expect([bucket('0.0025'), bucket('0.005'), bucket('+Inf')]).toEqual([0, 1, 1]);
    expect(sample(text, 'confboot_join_requests_in_flight')).toBe(1);
  });

  it('reads the attested TLS admission state at every scrape', async () => {
    const m = new JoinServiceMetrics({ processMetrics: false });
    let held = 3;
    m.observeAtls(() => ({ connections: held, sources: 2, verifying: 1 }));
    expect(sample(await m.render(), 'confboot_atls_unattested{kind="connections"}')).toBe(3);
    held = 7;
    const text = await m.render();
    expect(sample(text, 'confboot_atls_unattested{kind="connections"}')).toBe(7);
    expect(sample(text, 'confboot_atls_unattested{kind="sources"}')).toBe(2);
    expect(sample(text, 'confboot_atls_unattested{kind="verifying"}')).toBe(1);
  });

  it('keeps its own registry: two instances do not share samples, and process metrics are optional', async () => {
    const a = new JoinServiceMetrics({ processMetrics: false });
    const b = new JoinServiceMetrics();
    a.running(1);
    expect(sample(await b.render(), 'confboot_join_requests_in_flight')).toBe(0);
    expect(await a.render()).not.toContain('process_cpu_seconds_total');
    expect(await b.render()).toContain('process_cpu_seconds_total');
    expect(a.contentType).toMatch(/^text\/plain/);
  });

  it("samples the event loop every 100 ms for its process metrics, not prom-client's 10 ms", async () => {
    const monitor = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
    try {
      const m = new JoinServiceMetrics();
      expect(EVENT_LOOP_SAMPLE_MS).toBe(100);
      expect(monitor).toHaveBeenCalledTimes(1);
      expect(monitor).toHaveBeenCalledWith({ resolution: EVENT_LOOP_SAMPLE_MS });
      // The process metrics are there, the event loop's delay among them.
      const text = await m.render();
      expect(text).toMatch(/^nodejs_eventloop_lag_p99_seconds /m);
      expect(text).toMatch(/^process_cpu_seconds_total /m);
    } finally {
      monitor.mockRestore();
    }
  });
});
