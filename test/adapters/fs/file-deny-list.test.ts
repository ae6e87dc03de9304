/**
 * The deny list file: its JSON format (names folded like the ticket issuer records them, UUIDs in
 * lower case, unknown fields and non-strings refused), and the list over a real temp file: an
 * invalid first file refuses to start (a revocation list must not silently start empty), matches by
 * disk UUID first then node name, and an explicit reload takes a new list or keeps the last good one.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FileDenyList, parseDenyList } from '../../../src/adapters/fs/file-deny-list.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { useTmpDirs } from '../../support/tmp.js';

const UUID = '9C1D5CB2-3F5E-4A8A-B6C9-0E0A6F1D2C3B';
const tmp = useTmpDirs();
const lists: FileDenyList[] = [];
afterEach(async () => {
  for (const l of lists.splice(0)) await l.close();
});

describe('parseDenyList', () => {
  it('folds node names and lower-cases disk UUIDs; both fields are optional', () => {
    const e = parseDenyList(JSON.stringify({ nodes: [' Worker_3 '], diskUuids: [UUID] }));
    expect([[...e.nodes], [...e.diskUuids]]).toEqual([['worker-3'], [UUID.toLowerCase()]]);
    expect(parseDenyList('{}')).toEqual({ nodes: new Set(), diskUuids: new Set() });
  });

  it.each([
    ['not JSON', '{', 'deny list is not JSON: '],
    ['a list', '[]', 'deny list must be an object {"nodes": [...], "diskUuids": [...]}'],
    [
      'an unknown field',
      '{"node": ["a"]}',
      'deny list has unknown field "node" (allowed: "nodes", "diskUuids")',
    ],
    ['a string for a list', '{"nodes": "a"}', '"nodes" must be an array of strings'],
    ['an empty name', '{"diskUuids": ["x", " "]}', '"diskUuids"[1] must be a non-empty string'],
  ])('refuses %s as invalid-argument', (_n, text, message) => {
    expect(() => parseDenyList(text)).toThrow(
      expect.objectContaining({ code: 'invalid-argument', message: expect.stringContaining(message) }),
    );
  });
});

describe('FileDenyList', () => {
  async function start(text: string) {
    const path = join(tmp(), 'denylist.json');
    writeFileSync(path, text);
    const outcomes: unknown[] = [];
    const list = await FileDenyList.start({
      path,
      logger: new FakeLogger(),
      onReload: (o) => outcomes.push(o),
    });
    lists.push(list);
    return { path, list, outcomes };
  }

  it('refuses to start from an invalid file', async () => {
    const path = join(tmp(), 'denylist.json');
    writeFileSync(path, '{"nodes": 1}');
    await expect(FileDenyList.start({ path, logger: new FakeLogger() })).rejects.toThrow(
      /"nodes" must be an array/,
    );
  });

  it('matches a disk UUID in any case before a node name in any spelling', async () => {
    const { list } = await start(JSON.stringify({ nodes: ['worker-3'], diskUuids: [UUID] }));
    expect(list.size).toEqual({ nodes: 1, diskUuids: 1 });
    expect(list.match({ nodeName: 'Worker_3', diskUuid: UUID.toLowerCase() })).toEqual({
      kind: 'disk-uuid',
      value: UUID.toLowerCase(),
    });
    expect(list.match({ nodeName: 'WORKER_3' })).toEqual({ kind: 'node', value: 'worker-3' });
    expect(list.match({ nodeName: 'worker-4', diskUuid: 'other' })).toBeUndefined();
    expect(list.match({})).toBeUndefined();
  });

  it('takes a new list on reload and keeps the last good one when the new file is invalid', async () => {
    const { path, list, outcomes } = await start('{"nodes": ["a"]}');
    writeFileSync(path, '{"nodes": ["a", "b"], "diskUuids": ["u"]}');
    await list.reload();
    expect(list.match({ nodeName: 'b' })?.kind).toBe('node');
    writeFileSync(path, 'not json');
    await list.reload();
    expect(list.size).toEqual({ nodes: 2, diskUuids: 1 });
    expect(outcomes).toContainEqual({ ok: true, changed: true, nodes: 2, diskUuids: 1 });
    expect(outcomes.some((o) => (o as { ok: boolean }).ok === false)).toBe(true);
  });
});
