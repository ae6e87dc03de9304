/**
 * The host's component download server (what `mini` serves to its VMs) against the production
 * HttpComponentInstaller, over real HTTP on loopback with real files: the list's hashes are those
 * of the bytes served, a node gets them installed, and a node whose source address is marked
 * tampered gets altered bytes under the same URL and refuses them, naming both hashes, installing
 * nothing.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HttpComponentInstaller } from '../../../src/adapters/components/http-component-installer.js';
import {
  type RunningComponentServer,
  startComponentServer,
  tamperedBytes,
} from '../../../src/testbed/vm/component-server.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-component-server-');
const servers: RunningComponentServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

const KUBELET = Buffer.from('#!/bin/sh\necho kubelet\n');
const sha = (b: Uint8Array) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

async function serve(tampered: boolean) {
  const dir = tmp();
  const server = await startComponentServer({
    host: '127.0.0.1',
    components: [{ name: 'kubelet', bytes: KUBELET, installPath: join(dir, 'bin', 'kubelet') }],
    tamperedFor: () => tampered,
  });
  servers.push(server);
  return { server, path: join(dir, 'bin', 'kubelet') };
}

describe('component server (real HTTP on loopback, production installer)', () => {
  it('lists the hash of the bytes it serves; an untampered node installs them', async () => {
    const { server, path } = await serve(false);
    expect(server.list).toEqual([
      {
        url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/kubelet$/),
        hash: sha(KUBELET),
        installPath: path,
        extract: false,
      },
    ]);
    await new HttpComponentInstaller().install(server.list);
    expect(readFileSync(path)).toEqual(KUBELET);
    expect(server.downloads).toEqual([{ source: '127.0.0.1', name: 'kubelet', tampered: false }]);
  });

  it('a node marked tampered gets other bytes at the same URL and refuses them with both hashes, installing nothing', async () => {
    const { server, path } = await serve(true);
    const err = await new HttpComponentInstaller({ attempts: 1 }).install(server.list).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toContain(`expected ${sha(KUBELET)}`);
    expect(err?.message).toContain(`got ${sha(tamperedBytes(KUBELET))}`);
    expect(existsSync(path)).toBe(false);
    expect(server.downloads).toEqual([{ source: '127.0.0.1', name: 'kubelet', tampered: true }]);
  });
});
