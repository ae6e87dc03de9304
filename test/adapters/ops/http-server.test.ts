/** The join service's operations endpoint on 127.0.0.1, asked with fetch. */
import { afterEach, describe, expect, it } from 'vitest';
import {
  JWKS_PATH,
  type OperationsHttpServer,
  type OperationsHttpServerOptions,
  type ReadinessChecks,
  startOperationsHttpServer,
} from '../../../src/adapters/ops/http-server.js';
import { JoinServiceMetrics } from '../../../src/adapters/ops/metrics.js';
import { FakeLogger } from '../../fakes/fake-logger.js';

let server: OperationsHttpServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function start(extra: Partial<OperationsHttpServerOptions> = {}): Promise<string> {
  server = await startOperationsHttpServer({
    host: '127.0.0.1',
    port: 0,
    metrics: new JoinServiceMetrics({ processMetrics: false }),
    readiness: () => ({ validator: true }),
    logger: new FakeLogger(),
    ...extra,
  });
  return `http://127.0.0.1:${server.port}`;
}

describe('the operations HTTP server', () => {
  it('answers /healthz, and /readyz 200 or 503 with every check', async () => {
    let checks: ReadinessChecks = { validator: true, grpc: true };
    const base = await start({ readiness: () => checks });
    const health = await fetch(`${base}/healthz`);
    expect([health.status, await health.text(), health.headers.get('cache-control')]).toEqual([
      200,
      'ok\n',
      'no-store',
    ]);
    const ready = await fetch(`${base}/readyz`);
    expect([ready.status, await ready.json()]).toEqual([200, { ready: true, checks }]);
    checks = { validator: true, grpc: false };
    const notReady = await fetch(`${base}/readyz?verbose=1`);
    expect([notReady.status, await notReady.json()]).toEqual([503, { ready: false, checks }]);
  });

  it('renders the metrics registry on /metrics', async () => {
    const metrics = new JoinServiceMetrics({ processMetrics: false });
    metrics.running(1);
    const base = await start({ metrics });
    const res = await fetch(`${base}/metrics`);
    expect(res.headers.get('content-type')).toBe(metrics.contentType);
    expect(await res.text()).toContain('confboot_join_requests_in_flight 1');
  });

  it('publishes the JWKS only when one is configured', async () => {
    const jwks = { keys: [{ kty: 'EC', crv: 'P-256', x: 'AA', y: 'AA' }] };
    let base = await start();
    expect((await fetch(`${base}${JWKS_PATH}`)).status).toBe(404);
    await server?.close();
    base = await start({ jwks: () => jwks });
    const res = await fetch(`${base}${JWKS_PATH}`);
    expect([res.status, res.headers.get('content-type'), await res.json()]).toEqual([
      200,
      'application/jwk-set+json',
      jwks,
    ]);
  });

  it('answers 404 for other paths, 405 with Allow: GET for other methods', async () => {
    const base = await start();
    expect((await fetch(`${base}/admin`)).status).toBe(404);
    const post = await fetch(`${base}/healthz`, { method: 'POST' });
    expect([post.status, post.headers.get('allow')]).toEqual([405, 'GET']);
  });

  it('answers 500 and logs when building an answer fails', async () => {
    const logger = new FakeLogger();
    const base = await start({
      logger,
      readiness: () => {
        throw new Error('state unreadable');
      },
    });
    expect((await fetch(`${base}/readyz`)).status).toBe(500);
    expect(logger.events.map((e) => [e.msg, e.fields.error])).toEqual([
      ['Operations HTTP request failed', 'state unreadable'],
    ]);
  });

  it('names the address when it cannot listen', async () => {
    const base = await start();
    const port = Number(new URL(base).port);
    await expect(
      startOperationsHttpServer({
        host: '127.0.0.1',
        port,
        metrics: new JoinServiceMetrics({ processMetrics: false }),
        readiness: () => ({}),
        logger: new FakeLogger(),
      }),
    ).rejects.toThrow(new RegExp(`^operations HTTP listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`));
  });
});
