/**
 * loadKubeConfig's connection pool, through the real @kubernetes/client-node against a loopback HTTP
 * server that answers LIST nodes and counts the TCP connections it accepted.
 */

import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-kube-pool-');
const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((ok) => s.close(() => ok()));
  }
});

/** A server answering every request with an empty NodeList; `connections()` counts accepted sockets. */
async function nodeListServer(): Promise<{ url: string; connections: () => number }> {
  let accepted = 0;
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ apiVersion: 'v1', kind: 'NodeList', metadata: {}, items: [] }));
  });
  server.on('connection', () => {
    accepted++;
  });
  servers.push(server);
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => accepted };
}

/** A kubeconfig for `server` whose user names a client certificate file (read on every call). */
function kubeconfigFile(server: string, certFile: string): string {
  const path = join(tmp(), 'kubeconfig');
  writeFileSync(
    path,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]`,
      'contexts: [{name: c, context: {cluster: c, user: u}}]',
      'current-context: c',
      `users: [{name: u, user: {token: t, client-certificate: "${certFile}"}}]`,
      '',
    ].join('\n'),
  );
  return path;
}

async function listNodesSequentially(kc: KubeConfig, times: number): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  for (let i = 0; i < times; i++) expect((await core.listNode()).items).toEqual([]);
}

describe('loadKubeConfig: one connection pool per kubeconfig', () => {
  // undici hands a socket back to its pool a moment after the body was read, so a call that follows
  // at once may open a second one: "shared" is at most two connections for any number of calls.
  it('the client library alone opens a connection per call; through loadKubeConfig ten calls share at most two', async () => {
    const server = await nodeListServer();
    const cert = join(tmp(), 'client.crt');
    writeFileSync(cert, 'certificate 1');
    const path = kubeconfigFile(server.url, cert);

    const plain = new KubeConfig();
    plain.loadFromFile(path);
    await listNodesSequentially(plain, 5);
    expect(server.connections()).toBe(5);

    await listNodesSequentially(loadKubeConfig(path), 10);
    expect(server.connections() - 5).toBeGreaterThanOrEqual(1);
    expect(server.connections() - 5).toBeLessThanOrEqual(2);
  });

  it('a changed client certificate file gets a new pool, later calls share it', async () => {
    const server = await nodeListServer();
    const cert = join(tmp(), 'client.crt');
    writeFileSync(cert, 'certificate 1');
    const kc = loadKubeConfig(kubeconfigFile(server.url, cert));
    await listNodesSequentially(kc, 6);
    const before = server.connections();
    expect(before).toBeLessThanOrEqual(2);
    writeFileSync(cert, 'certificate 2 (rotated)');
    await listNodesSequentially(kc, 6);
    // The first call after the change cannot reuse a socket of the old pool.
    expect(server.connections() - before).toBeGreaterThanOrEqual(1);
    expect(server.connections() - before).toBeLessThanOrEqual(2);
  });
});
