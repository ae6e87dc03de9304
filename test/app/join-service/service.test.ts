/**
 * The join service end to end on loopback: real gRPC over attested TLS (test-only dummy
 * attestation), the real key service, the real FileCertificateAuthority, and SIMULATED Kubernetes
 * (in-memory bootstrap tokens and cluster facts; pki made by the simulated kubeadm init). Checks
 * tickets, deny list and its hot reload, rate limit and concurrency cap, audit events without
 * secrets, the operations HTTP server, gRPC health, graceful shutdown and a key service that is down.
 */
import { X509Certificate } from 'node:crypto';
import { mkdirSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { Client, credentials, status } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import {
  decodeHealthCheckResponse,
  encodeHealthCheckRequest,
  ServingStatus,
} from '../../../src/adapters/ops/grpc-health.js';
import type { JoinTicket } from '../../../src/ports/types.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { DummyIssuer } from '../../support/dummy-attestation.js';
import { freePort } from '../../support/net.js';
import { useTmpDirs } from '../../support/tmp.js';
import {
  grpcCodeOf,
  type Harness,
  type HarnessOptions,
  rejectionOf,
  secretForms,
  startHarness,
  waitFor,
} from './harness.js';

const tmp = useTmpDirs('confboot-join-service-');
const harnesses: Harness[] = [];
afterEach(async () => {
  for (const h of harnesses.splice(0)) await h.stop();
});

async function harness(options: HarnessOptions = {}): Promise<Harness> {
  const h = await startHarness(tmp(), options);
  harnesses.push(h);
  return h;
}

/** A ConfigMap-style directory: `denylist.json -> ..data/denylist.json`, `..data -> ..<version>`. */
function configMapDir(content: unknown): { path: string; swap: (content: unknown | string) => void } {
  const dir = tmp();
  let version = 0;
  const write = (c: unknown) => {
    version++;
    const v = join(dir, `..v${version}`);
    mkdirSync(v);
    writeFileSync(join(v, 'denylist.json'), typeof c === 'string' ? c : JSON.stringify(c));
    symlinkSync(`..v${version}`, join(dir, '..data_tmp'));
    renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  };
  write(content);
  symlinkSync('..data/denylist.json', join(dir, 'denylist.json'));
  return { path: join(dir, 'denylist.json'), swap: write };
}

function expectNoSecretsLogged(h: Harness, tickets: JoinTicket[]): void {
  const secrets: Array<Uint8Array | string> = [...h.secrets];
  for (const t of tickets) {
    secrets.push(t.stateDiskKey, t.measurementSecret, t.measurementSalt, t.token);
    secrets.push(t.token.split('.')[1] as string);
  }
  const forms = secrets.flatMap(secretForms);
  expect(h.logs.lines.length).toBeGreaterThan(0);
  for (const line of h.logs.lines)
    for (const f of forms) expect(line.includes(f), `log line holds a secret: ${line}`).toBe(false);
}

describe('join service (simulated Kubernetes, real key service and CA, attested TLS on loopback)', () => {
  it('issues a join ticket and a rejoin ticket, audits each request once, and logs no secret', async () => {
    const h = await harness();
    const req = await h.joinRequest('worker-1');
    const ticket = await h.client().issueJoinTicket(h.endpoint, req);

    expect(ticket.stateDiskKey).toHaveLength(32);
    expect(ticket.measurementSecret).toHaveLength(32);
    expect(ticket.apiServerEndpoint).toBe('10.0.0.1:6443');
    expect(h.cp.tokenValid(ticket.token)).toBe(true);
    expect(ticket.discoveryTokenCaCertHash).toMatch(/^sha256:[0-9a-f]{64}$/);
    const cert = new X509Certificate(Buffer.from(ticket.kubeletCert));
    expect(cert.verify(new X509Certificate(h.cp.caCertPem as string).publicKey)).toBe(true);
    expect(cert.subject).toContain('CN=system:node:worker-1');
    expect(h.cp.joiningNodes.has('worker-1')).toBe(true);

    const rejoin = await h.client().issueRejoinTicket(h.endpoint, { diskUuid: req.diskUuid.toUpperCase() });
    expect(Buffer.from(rejoin.stateDiskKey).equals(Buffer.from(ticket.stateDiskKey))).toBe(true);

    const audits = h.logs.audits();
    expect(audits).toHaveLength(2);
    expect(audits[0]).toMatchObject({
      event: 'join-audit',
      rpc: 'IssueJoinTicket',
      variant: 'dummy',
      nodeName: 'worker-1',
      diskUuid: req.diskUuid,
      outcome: 'issued',
      reason: 'ok',
    });
    expect(audits[0]?.peer).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(typeof audits[0]?.durationMs).toBe('number');
    expect(audits[1]).toMatchObject({
      rpc: 'IssueRejoinTicket',
      outcome: 'issued',
      diskUuid: req.diskUuid.toUpperCase(),
    });
    expectNoSecretsLogged(h, [ticket]);
  });

  it('refuses a deny-listed node with PERMISSION_DENIED before any key-service call', async () => {
    const dir = tmp();
    const path = join(dir, 'denylist.json');
    writeFileSync(path, JSON.stringify({ nodes: ['Worker_3'], diskUuids: [] }));
    const h = await harness({ denyListPath: path });

    const err = await rejectionOf(h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-3')));
    expect(grpcCodeOf(err)).toBe(status.PERMISSION_DENIED);
    expect(err.message).toMatch(/node "worker-3" is on the join service's deny list/);
    // The status message leads with the refusal's stable reason code.
    expect(err.message).toMatch(/: reason=deny-list issuing join ticket for 127\.0\.0\.1:\d+: /);
    expect(h.kms.calls).toBe(0);
    expect(h.cp.tokens.size).toBe(0);
    expect(h.logs.audits()).toEqual([
      expect.objectContaining({
        rpc: 'IssueJoinTicket',
        nodeName: 'worker-3',
        outcome: 'refused',
        code: 'permission-denied',
        reason: 'deny-list',
      }),
    ]);

    // Another node still joins.
    await h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-4'));
    expect(h.kms.calls).toBeGreaterThan(0);
  });

  it('refuses a deny-listed disk UUID on join and on rejoin, in any case, before any key-service call', async () => {
    const dir = tmp();
    const path = join(dir, 'denylist.json');
    const uuid = 'B9A5C5E4-1F0E-4C8B-9D0A-3E2F1A4B5C6D';
    writeFileSync(path, JSON.stringify({ diskUuids: [uuid] }));
    const h = await harness({ denyListPath: path });
    for (const call of [
      async () => h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-5', uuid.toLowerCase())),
      () => h.client().issueRejoinTicket(h.endpoint, { diskUuid: uuid }),
    ]) {
      const err = await rejectionOf(call());
      expect(grpcCodeOf(err)).toBe(status.PERMISSION_DENIED);
    }
    expect(h.kms.calls).toBe(0);
    expect(h.logs.audits().map((a) => [a.rpc, a.reason])).toEqual([
      ['IssueJoinTicket', 'deny-list'],
      ['IssueRejoinTicket', 'deny-list'],
    ]);
  });

  it('hot-reloads the deny list across ConfigMap symlink swaps and keeps the last good list when the new one is invalid', async () => {
    const cm = configMapDir({ nodes: [] });
    const h = await harness({ denyListPath: cm.path });
    await h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-6'));

    cm.swap({ nodes: ['worker-6'] });
    await waitFor(() => h.service.denyList.match({ nodeName: 'worker-6' }) !== undefined, 'deny list reload');
    const err = await rejectionOf(h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-6')));
    expect(grpcCodeOf(err)).toBe(status.PERMISSION_DENIED);

    cm.swap('{"nodes": ["worker-6"], "node": ["typo"]}');
    await waitFor(
      () => h.logs.events().some((e) => e.msg === 'Invalid deny list; keeping the last good list'),
      'invalid list logged',
    );
    expect(h.service.denyList.match({ nodeName: 'worker-6' })).toEqual({ kind: 'node', value: 'worker-6' });

    cm.swap({ nodes: [] });
    await waitFor(
      () => h.service.denyList.match({ nodeName: 'worker-6' }) === undefined,
      'deny list cleared',
    );
    await h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-6'));
    const metrics = (await h.http('/metrics')).body;
    expect(metrics).toMatch(/confboot_join_config_reloads_total\{config="deny-list",result="error"\} [1-9]/);
  });

  it('refuses to start when the configured deny list is missing or invalid', async () => {
    const dir = tmp();
    await expect(harness({ denyListPath: join(dir, 'missing.json') })).rejects.toThrow(/loading deny list/);
    writeFileSync(join(dir, 'bad.json'), '["worker-1"]');
    await expect(harness({ denyListPath: join(dir, 'bad.json') })).rejects.toThrow(/must be an object/);
  });

  it('answers a source over its rate limit with RESOURCE_EXHAUSTED before any work; fake time refills the bucket', async () => {
    const clock = new FakeClock(Date.now());
    const h = await harness({ clock, limits: { ratePerSecond: 1, burst: 2 } });
    const uuid = '6c1f3a1e-0d2b-4b8e-9f3c-1a2b3c4d5e6f';
    await h.client().issueRejoinTicket(h.endpoint, { diskUuid: uuid });
    await h.client().issueRejoinTicket(h.endpoint, { diskUuid: uuid });
    const calls = h.kms.calls;
    const err = await rejectionOf(h.client().issueRejoinTicket(h.endpoint, { diskUuid: uuid }));
    expect(grpcCodeOf(err)).toBe(status.RESOURCE_EXHAUSTED);
    expect(err.message).toMatch(/rate limit for 127\.0\.0\.1 reached/);
    expect(h.kms.calls).toBe(calls);
    await clock.advance(1_000);
    await h.client().issueRejoinTicket(h.endpoint, { diskUuid: uuid });
    expect(h.logs.audits().map((a) => a.reason)).toEqual(['ok', 'ok', 'rate-limited', 'ok']);
  });

  it('lets a request beyond the concurrency cap wait for a slot, and holds a connection beyond running + waiting requests unverified until there is room', async () => {
    // maxConcurrent 1: one request runs, one may wait (the queue is as long as the cap), so the
    // service keeps two attested connections; a third waits before its verification. (The handler
    // queue's own RESOURCE_EXHAUSTED refusal is tested in test/adapters/ops/limits.test.ts.)
    const h = await harness({ limits: { maxConcurrent: 1, ratePerSecond: 0 } });
    const validations = async () =>
      Number(
        /confboot_attestation_validation_seconds_count\{variant="dummy",outcome="ok"\} (\d+)/.exec(
          (await h.http('/metrics')).body,
        )?.[1] ?? 0,
      );
    h.kms.hold();
    const first = h
      .client()
      .issueRejoinTicket(h.endpoint, { diskUuid: '0f8fad5b-d9cb-469f-a165-70867728950e' });
    await h.kms.waitForCall();
    expect((await h.http('/metrics')).body).toMatch(/confboot_join_requests_in_flight 1\b/);
    const calls = h.kms.calls;
    const second = h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-7'));
    const third = h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-8'));
    // One of them is verified and waits for the handler's slot; the other waits for a connection.
    await waitFor(async () => (await validations()) === 2, 'the second verification');
    await new Promise((r) => setTimeout(r, 500));
    expect(await validations()).toBe(2);
    expect(h.kms.calls).toBe(calls);
    expect(h.logs.audits()).toEqual([]);
    h.kms.release();
    await first;
    await expect(second).resolves.toBeDefined();
    await expect(third).resolves.toBeDefined();
    expect(await validations()).toBe(3);
    expect((await h.http('/metrics')).body).toMatch(/confboot_join_requests_in_flight 0\b/);
    expect(h.logs.audits().map((a) => [a.rpc, a.reason])).toEqual([
      ['IssueRejoinTicket', 'ok'],
      ['IssueJoinTicket', 'ok'],
      ['IssueJoinTicket', 'ok'],
    ]);
  });

  it('serves /healthz, /readyz and /metrics (outcomes by variant and reason, validation latency), 404 and 405 otherwise', async () => {
    const dir = tmp();
    const path = join(dir, 'denylist.json');
    writeFileSync(path, JSON.stringify({ nodes: ['worker-9'] }));
    const h = await harness({ denyListPath: path });
    await h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-8'));
    await rejectionOf(h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-9')));
    await rejectionOf(h.client().issueJoinTicket(h.endpoint, await h.joinRequest('worker-8', 'not-a-uuid')));

    expect(await h.http('/healthz')).toEqual({ status: 200, body: 'ok\n' });
    const ready = await h.http('/readyz?verbose');
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body)).toEqual({
      ready: true,
      checks: { validator: true, grpcListening: true, dependencies: true, notShuttingDown: true },
    });
    const metrics = await h.http('/metrics');
    expect(metrics.status).toBe(200);
    const m = metrics.body;
    expect(m).toContain(
      'confboot_join_requests_total{rpc="IssueJoinTicket",outcome="issued",variant="dummy",reason="ok"} 1',
    );
    expect(m).toContain(
      'confboot_join_requests_total{rpc="IssueJoinTicket",outcome="refused",variant="dummy",reason="deny-list"} 1',
    );
    expect(m).toContain(
      'confboot_join_requests_total{rpc="IssueJoinTicket",outcome="refused",variant="dummy",reason="malformed-request"} 1',
    );
    expect(m).toContain('confboot_attestation_validation_seconds_count{variant="dummy",outcome="ok"} 3');
    expect(m).toContain('confboot_join_deny_list_entries{kind="node"} 1');
    expect((await h.http('/nope')).status).toBe(404);
    expect((await h.http('/metrics', 'POST')).status).toBe(405);
  });

  it('audits and counts connections that attested TLS refuses, without a key-service call', async () => {
    const h = await harness();
    const err = await rejectionOf(
      h.client(new DummyIssuer('qemu-vtpm')).issueJoinTicket(h.endpoint, await h.joinRequest('worker-10')),
    );
    expect(err.message).toMatch(/qemu-vtpm|OID|variant/i);
    await waitFor(() => h.logs.audits().length === 1, 'refusal audit');
    expect(h.logs.audits()[0]).toMatchObject({ rpc: 'attested-tls', outcome: 'refused', variant: 'unknown' });
    expect(h.kms.calls).toBe(0);
    expect((await h.http('/metrics')).body).toMatch(
      /confboot_join_requests_total\{rpc="attested-tls",outcome="refused",variant="unknown",reason="[a-z-]+"\} 1/,
    );
  });

  it('answers grpc.health.v1.Health/Check with SERVING on the attested port and on the plain health port', async () => {
    const plain = await freePort();
    const h = await harness({ grpcHealthListen: { host: '127.0.0.1', port: plain } });
    expect(h.service.grpcHealthPort).toBe(plain);
    expect(await h.healthCheck('')).toEqual({ status: ServingStatus.SERVING });
    expect(await h.healthCheck('join.API')).toEqual({ status: ServingStatus.SERVING });
    expect(await h.healthCheck('', plain)).toEqual({ status: ServingStatus.SERVING });
    const err = await rejectionOf(h.healthCheck('no.such.Service', plain));
    expect(grpcCodeOf(err)).toBe(status.NOT_FOUND);
  });

  it('shuts down gracefully: NOT_SERVING to watchers, not ready, new connections refused, the running request drains', async () => {
    const plain = await freePort();
    const h = await harness({
      grpcHealthListen: { host: '127.0.0.1', port: plain },
      limits: { shutdownGraceMs: 10_000 },
    });
    const watched: number[] = [];
    const watchClient = new Client(`127.0.0.1:${plain}`, credentials.createInsecure());
    const stream = watchClient.makeServerStreamRequest(
      '/grpc.health.v1.Health/Watch',
      (r: { service: string }) => Buffer.from(encodeHealthCheckRequest(r)),
      (b: Buffer) => decodeHealthCheckResponse(b),
      { service: '' },
    );
    const ended = new Promise<void>((resolve) => {
      stream.on('data', (r: { status: number }) => watched.push(r.status));
      stream.on('end', () => resolve());
      stream.on('error', () => resolve());
    });
    await waitFor(() => watched.length === 1, 'first health status');

    h.kms.hold();
    const running = h
      .client()
      .issueRejoinTicket(h.endpoint, { diskUuid: '9b2f6a3c-4d5e-4f60-8a7b-1c2d3e4f5a6b' });
    await h.kms.waitForCall();
    const closing = h.service.close();
    await waitFor(async () => (await h.http('/readyz')).status === 503, 'not ready during drain');
    expect(await h.healthCheck('', plain)).toEqual({ status: ServingStatus.NOT_SERVING });
    await ended;
    expect(watched).toEqual([ServingStatus.SERVING, ServingStatus.NOT_SERVING]);
    watchClient.close();
    const refused = await new Promise<boolean>((resolve) => {
      const s = connect(h.service.grpcPort, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(false);
      });
      s.once('error', () => resolve(true));
    });
    expect(refused).toBe(true);
    h.kms.release();
    const ticket = await running;
    expect(ticket.stateDiskKey).toHaveLength(32);
    await closing;
    expect(h.logs.events().some((e) => e.msg === 'Join service stopped')).toBe(true);
  });

  it('closes when its AbortSignal aborts (the CLI path for SIGTERM)', async () => {
    const stop = new AbortController();
    const h = await harness({ signal: stop.signal });
    expect(h.service.readiness().notShuttingDown).toBe(true);
    stop.abort();
    await h.service.closed;
    expect(h.service.readiness()).toMatchObject({ notShuttingDown: false, grpcListening: false });
  });

  it('answers UNAVAILABLE when the key service is down', async () => {
    const h = await harness({ kmsDown: true });
    const err = await rejectionOf(
      h.client().issueRejoinTicket(h.endpoint, { diskUuid: '1d8f2c3b-5a6e-4f70-9b8c-2d3e4f5a6b7c' }),
    );
    expect(grpcCodeOf(err)).toBe(status.UNAVAILABLE);
    expect(h.logs.audits()).toEqual([
      expect.objectContaining({
        rpc: 'IssueRejoinTicket',
        outcome: 'refused',
        code: 'unavailable',
        reason: 'dependency-failed',
      }),
    ]);
  });
});
