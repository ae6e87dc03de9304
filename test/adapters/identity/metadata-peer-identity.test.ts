/**
 * MetadataPeerIdentity: resolving a caller's address to a cluster instance through MetadataAPI.list()
 * — over the in-memory FakeMetadataAPI (cache, refresh on a miss, coalescing, transient failures,
 * under a FakeClock) and over the real QEMU metadata server on 127.0.0.1 with a leases file.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { QemuMetadataAPI } from '../../../src/adapters/cloud/qemu/metadata-api.js';
import {
  type RunningMetadataServer,
  startMetadataServer,
} from '../../../src/adapters/cloud/qemu/metadata-server.js';
import { MetadataPeerIdentity } from '../../../src/adapters/identity/metadata-peer-identity.js';
import { isConfbootError } from '../../../src/ports/errors.js';
import type { MetadataWorld } from '../../contract/metadata-api.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeMetadataAPI } from '../../fakes/fake-metadata-api.js';
import { useTmpDirs } from '../../support/tmp.js';

const world = (peers: MetadataWorld['peers']): MetadataWorld => ({
  self: { name: 'control-plane-0', role: 'ControlPlane', vpcIp: '127.0.0.2' },
  peers,
  foreign: [],
  uid: 'uid-1',
});
const W1 = { name: 'worker-1', role: 'Worker' as const, vpcIp: '127.0.0.10' };
const W2 = { name: 'worker-2', role: 'Worker' as const, vpcIp: '127.0.0.11' };

function subject(peers: MetadataWorld['peers'] = [W1]) {
  const metadata = new FakeMetadataAPI(world(peers));
  const clock = new FakeClock();
  return { metadata, clock, identity: new MetadataPeerIdentity(metadata, clock) };
}
const lists = (m: FakeMetadataAPI) => m.calls.filter((c) => c === 'list').length;

describe('MetadataPeerIdentity over FakeMetadataAPI', () => {
  it('resolves a VPC IP to name, addresses and role (control plane and worker)', async () => {
    const { identity } = subject();
    expect(await identity.resolve('127.0.0.10')).toEqual({
      name: 'worker-1',
      ips: ['127.0.0.10'],
      role: 'Worker',
    });
    expect(await identity.resolve('127.0.0.2')).toEqual({
      name: 'control-plane-0',
      ips: ['127.0.0.2'],
      role: 'ControlPlane',
    });
  });

  it("passes on the cloud's immutable instance ID where the cloud has one", async () => {
    const { identity } = subject([{ ...W1, instanceId: '4512345678901234567' }, W2]);
    expect(await identity.resolve('127.0.0.10')).toEqual({
      name: 'worker-1',
      ips: ['127.0.0.10'],
      role: 'Worker',
      instanceId: '4512345678901234567',
    });
    expect((await identity.resolve('127.0.0.11'))?.instanceId).toBeUndefined();
  });

  it('matches an IPv4-mapped IPv6 caller; a non-IP is unknown without asking metadata', async () => {
    const { identity, metadata } = subject();
    expect((await identity.resolve('::ffff:127.0.0.10'))?.name).toBe('worker-1');
    expect(await identity.resolve('not-an-ip')).toBeUndefined();
    expect(lists(metadata)).toBe(1);
  });

  it('matches an IPv6 VPC IP however either side spells it', async () => {
    const V6 = { name: 'worker-6', role: 'Worker' as const, vpcIp: '2001:db8::6' };
    const { identity } = subject([W1, V6]);
    expect((await identity.resolve('2001:DB8:0:0::6'))?.name).toBe('worker-6');
    expect((await identity.resolve('2001:db8:0:0:0:0:0:6'))?.name).toBe('worker-6');
    expect(await identity.resolve('2001:db8::7')).toBeUndefined();
  });

  it('uses one list for many callers within the TTL, and lists again after it', async () => {
    const { identity, metadata, clock } = subject([W1, W2]);
    await Promise.all([identity.resolve('127.0.0.10'), identity.resolve('127.0.0.11')]);
    await identity.resolve('127.0.0.2');
    expect(lists(metadata)).toBe(1);
    await clock.advance(10_000);
    await identity.resolve('127.0.0.10');
    expect(lists(metadata)).toBe(2);
  });

  it('a miss lists again (a node created since is found), but at most once a second', async () => {
    const { identity, metadata, clock } = subject([W1]);
    await identity.resolve('127.0.0.10');
    metadata.setWorld(world([W1, W2]));
    // Within a second of the last list, an unknown address does not cost a cloud call.
    expect(await identity.resolve('127.0.0.11')).toBeUndefined();
    expect(lists(metadata)).toBe(1);
    await clock.advance(1_000);
    expect((await identity.resolve('127.0.0.11'))?.name).toBe('worker-2');
    expect(lists(metadata)).toBe(2);
    await clock.advance(1_000);
    expect(await identity.resolve('127.0.0.99')).toBeUndefined();
    expect(lists(metadata)).toBe(3);
  });

  it('an instance without a role yet is looked up again', async () => {
    const { identity, metadata, clock } = subject([{ ...W1, role: 'Unknown' }]);
    expect((await identity.resolve('127.0.0.10'))?.role).toBe('Unknown');
    metadata.setWorld(world([W1]));
    await clock.advance(1_000);
    expect((await identity.resolve('127.0.0.10'))?.role).toBe('Worker');
  });

  it('two instances claiming one address resolve to neither', async () => {
    const { identity } = subject([W1, { ...W2, vpcIp: W1.vpcIp }]);
    expect(await identity.resolve('127.0.0.10')).toBeUndefined();
  });

  it('a transient metadata failure rejects unavailable naming the caller; the next call works', async () => {
    const { identity, metadata } = subject();
    metadata.failNext();
    const err = await identity.resolve('127.0.0.10').catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect(isConfbootError(err) && err.recoverable).toBe(true);
    expect((err as Error).message).toBe(
      "resolving caller 127.0.0.10 through the cloud's instance metadata: fake metadata list: injected transient failure",
    );
    expect((await identity.resolve('127.0.0.10'))?.name).toBe('worker-1');
  });

  it('an expired list is not used when listing fails (no stale identities)', async () => {
    const { identity, metadata, clock } = subject();
    await identity.resolve('127.0.0.10');
    await clock.advance(10_000);
    metadata.failNext();
    await expect(identity.resolve('127.0.0.10')).rejects.toMatchObject({ code: 'unavailable' });
  });

  it('bounds each list call with its timeout', async () => {
    const metadata = new FakeMetadataAPI(world([W1]));
    const identity = new MetadataPeerIdentity(metadata, new FakeClock(), { timeoutInMs: 20 });
    metadata.stallNext();
    await expect(identity.resolve('127.0.0.10')).rejects.toMatchObject({ code: 'unavailable' });
  });
});

describe('MetadataPeerIdentity over the QEMU metadata server (real HTTP on 127.0.0.1)', () => {
  const tmp = useTmpDirs();
  let server: RunningMetadataServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('resolves leases by IP, with the role from the host name; unknown addresses are undefined', async () => {
    const dir = tmp();
    const leases = join(dir, 'leases');
    const expiry = Math.floor(Date.now() / 1000) + 3600;
    writeFileSync(
      leases,
      [
        `${expiry} 52:54:00:00:00:02 127.0.0.2 control-plane-0 *`,
        `${expiry} 52:54:00:00:00:0a 127.0.0.10 worker-1 *`,
      ].join('\n'),
    );
    server = await startMetadataServer({ leasesFile: leases, host: '127.0.0.1', port: 0 });
    const identity = new MetadataPeerIdentity(
      new QemuMetadataAPI({ baseUrl: `http://127.0.0.1:${server.port}` }),
      new FakeClock(),
    );
    expect(await identity.resolve('127.0.0.10')).toEqual({
      name: 'worker-1',
      ips: ['127.0.0.10'],
      role: 'Worker',
    });
    expect((await identity.resolve('127.0.0.2'))?.role).toBe('ControlPlane');
    expect(await identity.resolve('127.0.0.77')).toBeUndefined();
  });
});
