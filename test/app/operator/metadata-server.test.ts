/**
 * The QEMU metadata server over real HTTP on loopback, with real source addresses
 * 127.0.0.N, and the `confboot metadata-server` command run in-process.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type RunningMetadataServer,
  startMetadataServer,
} from '../../../src/adapters/cloud/qemu/metadata-server.js';
import { httpRequest } from '../../../src/adapters/http/request.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { loadBalancerIp, parseListen, run } from '../../../src/app/operator/metadata-server.js';
import { leasesText } from '../../adapters/cloud/qemu/fake-qemu-server.js';
import { freePort } from '../../support/net.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-mds-');

const LEASES = [
  { ip: '127.0.0.2', hostname: 'control-plane-1' },
  { ip: '127.0.0.3', hostname: 'control-plane-0' },
  { ip: '127.0.0.4', hostname: 'worker-0' },
];

describe('QEMU metadata server', () => {
  let server: RunningMetadataServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  async function start(
    leases = LEASES,
    initSecretHash = '$2a$10$hash',
    loadBalancerIp?: string,
  ): Promise<{ url: string; file: string }> {
    const file = join(tmp(), 'leases');
    await writeFile(file, leasesText(leases));
    server = await startMetadataServer({
      leasesFile: file,
      initSecretHash,
      host: '127.0.0.1',
      port: 0,
      ...(loadBalancerIp ? { loadBalancerIp } : {}),
    });
    return { url: `http://127.0.0.1:${server.port}`, file };
  }

  const get = (url: string, localAddress?: string, method = 'GET') =>
    httpRequest({ url, method, ...(localAddress ? { localAddress } : {}) });

  it('answers /self by the source address, as upstream JSON with a trailing newline', async () => {
    const { url } = await start();
    const res = await get(`${url}/self`, '127.0.0.4');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('application/json');
    expect(res.body.toString()).toBe(
      '{"Name":"worker-0","ProviderID":"qemu:///hostname/worker-0","Role":"Worker","VPCIP":"127.0.0.4","SecondaryIPRange":"","AliasIPRanges":null}\n',
    );
  });

  it("serves /self/identity from the identities file by the caller's lease, 404 without one", async () => {
    const { url } = await start();
    const res0 = await get(`${url}/self/identity`, '127.0.0.4');
    expect(res0.status).toBe(404); // no identities file configured
    await server?.close();
    const file = join(tmp(), 'leases');
    await writeFile(file, leasesText(LEASES));
    const identities = join(tmp(), 'identities.json');
    await writeFile(identities, JSON.stringify({ 'worker-0': { akPub: 'AAEC' } }));
    server = await startMetadataServer({
      leasesFile: file,
      identitiesFile: identities,
      host: '127.0.0.1',
      port: 0,
    });
    const base = `http://127.0.0.1:${server.port}`;
    const mine = await get(`${base}/self/identity`, '127.0.0.4');
    expect(mine.status).toBe(200);
    expect(JSON.parse(mine.body.toString())).toEqual({ akPub: 'AAEC' });
    expect((await get(`${base}/self/identity`, '127.0.0.3')).status).toBe(404); // control-plane-0: none
    expect((await get(`${base}/self/identity`, '127.0.0.9')).status).toBe(404); // no lease
  });

  it('answers 404 "No matching peer found" for an unknown source address', async () => {
    const { url } = await start();
    const res = await get(`${url}/self`, '127.0.0.9');
    expect(res.status).toBe(404);
    expect(res.body.toString()).toMatch(/No matching peer found/);
  });

  it('lists every lease on /peers with roles from the hostname prefix', async () => {
    const { url } = await start();
    const peers = JSON.parse((await get(`${url}/peers`)).body.toString()) as { Name: string; Role: string }[];
    expect(peers.map((p) => [p.Name, p.Role])).toEqual([
      ['control-plane-1', 'ControlPlane'],
      ['control-plane-0', 'ControlPlane'],
      ['worker-0', 'Worker'],
    ]);
  });

  it('answers /endpoint with the first control-plane hostname ending in 0, as a JSON string', async () => {
    const { url } = await start();
    const res = await get(`${url}/endpoint`);
    expect(res.body.toString()).toBe('"127.0.0.3"\n');
  });

  it("answers /endpoint with the load balancer's address when one is configured, control-plane-0 or not", async () => {
    for (const leases of [LEASES, [{ ip: '127.0.0.2', hostname: 'control-plane-1' }]]) {
      const { url } = await start(leases, '', '127.0.0.9');
      expect((await get(`${url}/endpoint`)).body.toString()).toBe('"127.0.0.9"\n');
      await server?.close();
    }
    server = undefined;
  });

  it('refuses a --load-balancer that is not an IP address (usage error)', () => {
    expect(() => loadBalancerIp('lb.example')).toThrow(/--load-balancer: expected an IP address/);
    expect(loadBalancerIp('10.42.0.2')).toBe('10.42.0.2');
  });

  it('answers /endpoint 404 without such a control plane', async () => {
    const { url } = await start([{ ip: '127.0.0.2', hostname: 'control-plane-1' }]);
    expect((await get(`${url}/endpoint`)).status).toBe(404);
  });

  it('answers 500 once (and nothing else) when the leases file cannot be read', async () => {
    const { url, file } = await start();
    await writeFile(file, 'garbage\n');
    const res = await get(`${url}/endpoint`);
    expect(res.status).toBe(500);
    // exactly one error line: no endpoint written after the 500 (upstream's quirk)
    expect(res.body.toString()).toMatch(/^reading leases: leases line 1[^\n]*\n$/);
  });

  it('re-reads the leases file on every request', async () => {
    const { url, file } = await start();
    await writeFile(file, leasesText([...LEASES, { ip: '127.0.0.5', hostname: 'worker-1' }]));
    expect((await get(`${url}/self`, '127.0.0.5')).status).toBe(200);
  });

  it('answers /initsecrethash as text/plain with the configured hash', async () => {
    const { url } = await start();
    const res = await get(`${url}/initsecrethash`);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    expect(res.body.toString()).toBe('$2a$10$hash');
  });

  it.each(['/self', '/peers', '/endpoint', '/initsecrethash'])('answers 405 to POST %s', async (path) => {
    const { url } = await start();
    expect((await get(`${url}${path}`, undefined, 'POST')).status).toBe(405);
  });

  it('answers 404 for unknown paths', async () => {
    const { url } = await start();
    expect((await get(`${url}/nope`)).status).toBe(404);
  });
});

describe('confboot metadata-server', () => {
  it('serves until its signal aborts, then exits 0', async () => {
    const file = join(tmp(), 'leases');
    await writeFile(file, leasesText(LEASES));
    const port = await freePort();
    const stop = new AbortController();
    const before = [process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')];
    let listening: (p: number) => void = () => {};
    const up = new Promise<number>((r) => {
      listening = r;
    });
    const exit = run(['--leases', file, '--init-secret-hash', 'H', '--listen', `127.0.0.1:${port}`], {
      signal: stop.signal,
      logger: silentLogger,
      onListening: listening,
    });
    expect(await up).toBe(port);
    expect((await httpRequest({ url: `http://127.0.0.1:${port}/initsecrethash` })).body.toString()).toBe('H');
    stop.abort();
    expect(await exit).toBe(0);
    // SIGTERM/SIGINT handlers are removed again after shutdown
    expect([process.listenerCount('SIGTERM'), process.listenerCount('SIGINT')]).toEqual(before);
    await expect(httpRequest({ url: `http://127.0.0.1:${port}/peers` })).rejects.toThrow(/ECONNREFUSED/);
  });

  it('exits 2 without --leases', async () => {
    expect(await run(['--listen', '127.0.0.1:1'])).toBe(2);
  });

  it.each([['nohost'], ['127.0.0.1:99999'], ['127.0.0.1:']])('rejects --listen %s', (value) => {
    expect(() => parseListen(value)).toThrow(/HOST:PORT/);
  });

  it('parses a bracketed IPv6 --listen', () => {
    expect(parseListen('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
  });
});
