/**
 * Disk bindings in memory: the first node to bind a disk keeps it (later binds get the existing
 * binding back), UUIDs compare in any case, releaseOthers drops the given owners' other disks and
 * keeps the named one, and callers never hold the stored objects.
 */
import { describe, expect, it } from 'vitest';
import { InMemoryDiskBindings } from '../../../src/adapters/memory/in-memory-disk-bindings.js';

const UUID = '9C1D5CB2-3F5E-4A8A-B6C9-0E0A6F1D2C3B';
const binding = (diskUuid: string, nodeName: string, owner: string) => ({ diskUuid, nodeName, owner });

describe('InMemoryDiskBindings', () => {
  it('binds a disk to the first node and returns that binding to every later bind', async () => {
    const b = new InMemoryDiskBindings();
    expect(await b.bind(binding(UUID, 'worker-0', 'vm-a'))).toEqual(
      binding(UUID.toLowerCase(), 'worker-0', 'vm-a'),
    );
    expect(await b.bind(binding(UUID.toLowerCase(), 'worker-9', 'vm-evil'))).toEqual(
      binding(UUID.toLowerCase(), 'worker-0', 'vm-a'),
    );
    expect(b.size).toBe(1);
  });

  it('hands out copies', async () => {
    const b = new InMemoryDiskBindings();
    const got = await b.bind(binding(UUID, 'worker-0', 'vm-a'));
    got.nodeName = 'changed';
    expect((await b.bind(binding(UUID, 'x', 'y'))).nodeName).toBe('worker-0');
  });

  it("releases the owners' other disks, keeps the named one and other owners' disks", async () => {
    const b = new InMemoryDiskBindings();
    await b.bind(binding('aaaa', 'worker-0', 'vm-a'));
    await b.bind(binding('bbbb', 'worker-0', 'vm-a'));
    await b.bind(binding('cccc', 'worker-1', 'vm-b'));
    await b.bind(binding('dddd', 'worker-2', 'vm-c'));
    const released = await b.releaseOthers(['vm-a', 'vm-b'], 'BBBB');
    expect(released.map((r) => r.diskUuid).sort()).toEqual(['aaaa', 'cccc']);
    expect(b.size).toBe(2);
    expect((await b.bind(binding('aaaa', 'worker-5', 'vm-e'))).nodeName).toBe('worker-5');
  });

  it('releases one disk on an operator’s word, in any case', async () => {
    const b = new InMemoryDiskBindings();
    await b.bind(binding(UUID, 'worker-0', 'vm-a'));
    expect(b.release(UUID.toLowerCase())).toBe(true);
    expect(b.release(UUID)).toBe(false);
    expect(b.size).toBe(0);
  });
});
