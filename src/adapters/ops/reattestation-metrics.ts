/**
 * The node operator's re-attestation metrics on a private prom-client Registry:
 * `confboot_reattestation_total{result,reason}` (every node re-attested, by result and reason code)
 * and `confboot_reattestation_failing_nodes` (nodes whose last re-attestation failed, after each
 * round). Label values come from the closed sets of ports/reattestation.ts, so cardinality is
 * bounded. {@link startMetricsHttpServer} serves the registry at `/metrics` (plain HTTP, GET only).
 */
import { createServer } from 'node:http';
import { Counter, Gauge, Registry } from 'prom-client';
import type { ReattestationMetrics, ReattestationReason } from '../../ports/reattestation.js';

/** See the module header. */
export class PromReattestationMetrics implements ReattestationMetrics {
  /** The private registry `/metrics` renders. */
  readonly registry: Registry;
  readonly total: Counter<'result' | 'reason'>;
  readonly failingNodes: Gauge;

  constructor(registry: Registry = new Registry()) {
    this.registry = registry;
    this.total = new Counter({
      name: 'confboot_reattestation_total',
      help: 'Re-attestations of joined nodes, by result (ok, failed) and reason code',
      labelNames: ['result', 'reason'],
      registers: [registry],
    });
    this.failingNodes = new Gauge({
      name: 'confboot_reattestation_failing_nodes',
      help: 'Joined nodes whose last re-attestation failed',
      registers: [registry],
    });
  }

  count(result: 'ok' | 'failed', reason: ReattestationReason): void {
    this.total.inc({ result, reason });
  }

  failing(nodes: number): void {
    this.failingNodes.set(nodes);
  }
}

/** A running `/metrics` endpoint. */
export interface MetricsHttpServer {
  readonly port: number;
  close(): Promise<void>;
}

/** Serves `registry` at `GET /metrics` on `host:port` (0 picks a free port); anything else is 404/405. */
export async function startMetricsHttpServer(
  registry: Registry,
  host: string,
  port: number,
): Promise<MetricsHttpServer> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      res.writeHead(404).end();
      return;
    }
    if (req.method !== 'GET') {
      res.writeHead(405, { allow: 'GET' }).end();
      return;
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' });
        res.end(text);
      },
      () => res.writeHead(500).end(),
    );
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 10_000;
  server.maxConnections = 16;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  return {
    port: typeof address === 'object' && address !== null ? address.port : port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
