/**
 * QemuMetadataAPI through real HTTP against the real QEMU metadata server (leases file in a temp
 * dir), plus the cases upstream's client got wrong: non-200 answers and malformed JSON.
 */
import { createServer } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { QemuMetadataAPI } from '../../../../src/adapters/cloud/qemu/metadata-api.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { CONTRACT_SELF_IP, describeMetadataApiContract } from '../../../contract/metadata-api.js';
import { useTmpDirs } from '../../../support/tmp.js';
import { FakeQemuCloud } from './fake-qemu-server.js';

const tmp = useTmpDirs('confboot-qemu-');

describeMetadataApiContract('QemuMetadataAPI (real metadata server on loopback)', async () => {
  const cloud = await FakeQemuCloud.start(tmp());
  const subject = new QemuMetadataAPI({
    baseUrl: cloud.url,
    localAddress: CONTRACT_SELF_IP,
    timeoutInMs: 5_000,
  });
  return {
    subject,
    seed: {
      async world(w) {
        await cloud.setLeases([w.self, ...w.peers].map((i) => ({ ip: i.vpcIp, hostname: i.name })));
        await cloud.restart(w.initSecretHash ?? '');
      },
      failNextRequest: async () => cloud.faults.failNext(),
      stallNextRequest: async () => cloud.faults.stallNext(),
    },
    cleanup: () => cloud.close(),
    supports: { uid: false, transientFailure: true, timeout: true },
  };
});

describe('QemuMetadataAPI', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  /** A server that answers every request with the given status and body. */
  async function cannedServer(status: number, body: string, type = 'application/json'): Promise<string> {
    const srv = createServer((_req, res) => {
      res.writeHead(status, { 'content-type': type });
      res.end(body);
    });
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    closers.push(() => new Promise((r) => srv.close(() => r())));
    const addr = srv.address();
    return `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  }

  async function rejection(p: Promise<unknown>): Promise<unknown> {
    return p.then(
      () => {
        throw new Error('expected a rejection');
      },
      (e: unknown) => e,
    );
  }

  it('tells two loopback nodes apart by the source address each binds', async () => {
    const cloud = await FakeQemuCloud.start(tmp());
    closers.push(() => cloud.close());
    await cloud.setLeases([
      { ip: '127.0.0.2', hostname: 'control-plane-0' },
      { ip: '127.0.0.3', hostname: 'worker-0' },
    ]);
    const cp = new QemuMetadataAPI({ baseUrl: cloud.url, localAddress: '127.0.0.2' });
    const worker = new QemuMetadataAPI({ baseUrl: cloud.url, localAddress: '127.0.0.3' });
    expect(await cp.self()).toEqual({
      name: 'control-plane-0',
      providerId: 'qemu:///hostname/control-plane-0',
      role: 'ControlPlane',
      vpcIp: '127.0.0.2',
    });
    expect((await worker.self()).name).toBe('worker-0');
  });

  it('rejects "No matching peer found" (404) instead of returning an empty instance', async () => {
    const cloud = await FakeQemuCloud.start(tmp());
    closers.push(() => cloud.close());
    await cloud.setLeases([{ ip: '127.0.0.2', hostname: 'control-plane-0' }]);
    const err = await rejection(
      new QemuMetadataAPI({ baseUrl: cloud.url, localAddress: '127.0.0.9' }).self(),
    );
    expect(isConfbootError(err)).toBe(true);
    expect((err as Error).message).toMatch(/HTTP 404 \(No matching peer found\)/);
  });

  it.each([
    ['500 on /peers', 500, 'boom', 'list', 'unavailable'],
    ['503 on /self', 503, 'busy', 'self', 'unavailable'],
    ['404 on /endpoint', 404, 'No control plane found', 'getLoadBalancerEndpoint', 'failed-precondition'],
    ['403 on /initsecrethash', 403, 'no', 'initSecretHash', 'permission-denied'],
  ] as const)('rejects a non-200 answer: %s', async (_name, status, body, method, code) => {
    const api = new QemuMetadataAPI({ baseUrl: await cannedServer(status, body) });
    const err = await rejection(api[method]());
    expect(isConfbootError(err) && err.code).toBe(code);
  });

  it.each([
    ['self with a missing VPCIP', 'self', '{"Name":"a","ProviderID":"p","Role":"Worker"}'],
    ['self with an unknown role', 'self', '{"Name":"a","ProviderID":"p","Role":"Boss","VPCIP":"1.2.3.4"}'],
    ['peers that are not a list', 'list', '{"Name":"a"}'],
    ['an endpoint that is not a string', 'getLoadBalancerEndpoint', '{"host":"1.2.3.4"}'],
    ['a body that is not JSON', 'self', 'not json'],
  ] as const)('rejects a malformed answer: %s', async (_name, method, body) => {
    const api = new QemuMetadataAPI({ baseUrl: await cannedServer(200, body) });
    const err = await rejection(api[method]());
    expect(isConfbootError(err) && err.code).toBe('internal');
  });

  it('rejects unavailable when nothing listens (never crashes)', async () => {
    const base = await cannedServer(200, '""');
    for (const c of closers.splice(0)) await c();
    const err = await rejection(new QemuMetadataAPI({ baseUrl: base }).list());
    expect(isConfbootError(err) && err.recoverable).toBe(true);
  });
});
