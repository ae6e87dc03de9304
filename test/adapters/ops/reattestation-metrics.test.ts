import { afterEach, describe, expect, it } from 'vitest';
import {
  PromReattestationMetrics,
  startMetricsHttpServer,
} from '../../../src/adapters/ops/reattestation-metrics.js';
import { requestText } from '../../support/net.js';

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

const get = (port: number, path: string, method = 'GET') => requestText({ port, path, method });

describe('PromReattestationMetrics', () => {
  it('counts by result and reason and gauges the failing nodes, served at /metrics over real HTTP', async () => {
    const m = new PromReattestationMetrics();
    m.count('ok', 'ok');
    m.count('ok', 'ok');
    m.count('failed', 'measurement-mismatch');
    m.failing(1);
    const server = await startMetricsHttpServer(m.registry, '127.0.0.1', 0);
    closers.push(() => server.close());
    const { status, body } = await get(server.port, '/metrics');
    expect(status).toBe(200);
    expect(body).toContain('confboot_reattestation_total{result="ok",reason="ok"} 2');
    expect(body).toContain('confboot_reattestation_total{result="failed",reason="measurement-mismatch"} 1');
    expect(body).toContain('confboot_reattestation_failing_nodes 1');
    expect((await get(server.port, '/other')).status).toBe(404);
    expect((await get(server.port, '/metrics', 'POST')).status).toBe(405);
  });

  it('two instances never share a registry', async () => {
    const a = new PromReattestationMetrics();
    const b = new PromReattestationMetrics();
    a.failing(3);
    expect(await b.registry.metrics()).toContain('confboot_reattestation_failing_nodes 0');
  });
});
