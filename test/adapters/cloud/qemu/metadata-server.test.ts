/**
 * The QEMU metadata server on loopback, its leases and identities files in a temp dir: each client
 * binds its own 127.0.0.0/8 source address, which the server matches against the leases.
 */
import { writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type MetadataServerOptions,
  type RunningMetadataServer,
  startMetadataServer,
} from '../../../../src/adapters/cloud/qemu/metadata-server.js';
import { useTmpDirs } from '../../../support/tmp.js';

const tmp = useTmpDirs('confboot-qemu-metadata-');
let server: RunningMetadataServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const LEASES = [
  '0 52:54:00:00:00:01 127.0.0.2 control-plane-0 *',
  '0 52:54:00:00:00:02 127.0.0.3 worker-0 *',
  '',
].join('\n');

async function start(extra: Partial<MetadataServerOptions> = {}, leases = LEASES): Promise<string> {
  const dir = tmp();
  const leasesFile = join(dir, 'leases');
  writeFileSync(leasesFile, leases);
  server = await startMetadataServer({ leasesFile, host: '127.0.0.1', port: 0, ...extra });
  return leasesFile;
}

/** One request from `from`; the status and the body. */
function get(path: string, from = '127.0.0.1', method = 'GET'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      { host: '127.0.0.1', port: server?.port, path, method, localAddress: from, timeout: 5_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

describe('the QEMU metadata server', () => {
  it("answers /self with the caller's lease, matched by its source address, as upstream's JSON", async () => {
    await start();
    const self = await get('/self', '127.0.0.3');
    expect(self.status).toBe(200);
    expect(self.body).toBe(
      '{"Name":"worker-0","ProviderID":"qemu:///hostname/worker-0","Role":"Worker","VPCIP":"127.0.0.3","SecondaryIPRange":"","AliasIPRanges":null}\n',
    );
    expect(await get('/self', '127.0.0.9')).toEqual({ status: 404, body: 'No matching peer found\n' });
  });

  it('answers /peers from the leases as they are now, re-read per request', async () => {
    const leasesFile = await start();
    const peers = JSON.parse((await get('/peers')).body) as { Name: string; Role: string }[];
    expect(peers.map((p) => [p.Name, p.Role])).toEqual([
      ['control-plane-0', 'ControlPlane'],
      ['worker-0', 'Worker'],
    ]);
    writeFileSync(leasesFile, `${LEASES}0 52:54:00:00:00:03 127.0.0.4 worker-1 *\n`);
    expect(JSON.parse((await get('/peers')).body)).toHaveLength(3);
  });

  it("answers /endpoint with control-plane-0's address, or the load balancer's when configured", async () => {
    await start();
    expect(await get('/endpoint')).toEqual({ status: 200, body: '"127.0.0.2"\n' });
    await server?.close();
    await start({ loadBalancerIp: '10.9.9.9' });
    expect((await get('/endpoint')).body).toBe('"10.9.9.9"\n');
    await server?.close();
    await start({}, '0 52:54:00:00:00:02 127.0.0.3 worker-0 *\n');
    expect((await get('/endpoint')).status).toBe(404);
  });

  it('answers /initsecrethash with the configured hash, empty by default', async () => {
    await start({ initSecretHash: '$2a$10$abc' });
    expect(await get('/initsecrethash')).toEqual({ status: 200, body: '$2a$10$abc' });
    await server?.close();
    await start();
    expect(await get('/initsecrethash')).toEqual({ status: 200, body: '' });
  });

  it("answers /self/identity with the caller's registered identity, and 404 without an identities file", async () => {
    await start();
    expect((await get('/self/identity', '127.0.0.2')).status).toBe(404);
    await server?.close();
    const identitiesFile = join(tmp(), 'identities.json');
    writeFileSync(identitiesFile, JSON.stringify({ 'control-plane-0': { attestationKeyPublic: 'QUs=' } }));
    await start({ identitiesFile });
    expect(await get('/self/identity', '127.0.0.2')).toEqual({
      status: 200,
      body: '{"attestationKeyPublic":"QUs="}\n',
    });
    expect(await get('/self/identity', '127.0.0.3')).toEqual({
      status: 404,
      body: 'No identity registered\n',
    });
    writeFileSync(identitiesFile, '{broken');
    expect((await get('/self/identity', '127.0.0.2')).status).toBe(500);
  });

  it('answers 404 for unknown paths, 405 for other methods, and 500 when the leases cannot be read', async () => {
    await start({}, '0 52:54:00:00:00:01 127.0.0.2\n');
    expect((await get('/other')).status).toBe(404);
    expect((await get('/peers', '127.0.0.1', 'POST')).status).toBe(405);
    const broken = await get('/peers');
    expect(broken.status).toBe(500);
    expect(broken.body).toMatch(/^reading leases: leases line 1/);
  });
});
