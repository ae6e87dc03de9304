/** JsonNodeStateStore against real files: upstream's Go JSON format, role parsing and the one-write rule. */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ExclusiveFileWriter } from '../../../src/adapters/state/exclusive-file-writer.js';
import { JsonNodeStateStore } from '../../../src/adapters/state/json-node-state-store.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-nodestate-');
const salt = new Uint8Array(32).map((_, i) => i * 7);
const saltB64 = Buffer.from(salt).toString('base64');

describe('JsonNodeStateStore', () => {
  it('writes Go JSON, tab-indented, mode 0600, creating the state directory', async () => {
    const path = join(tmp(), 'run', 'state', 'constellation', 'node_state.json');
    await new JsonNodeStateStore({ path }).write({ role: 'ControlPlane', measurementSalt: salt });
    expect(await readFile(path, 'utf8')).toBe(
      `{\n\t"Role": "ControlPlane",\n\t"MeasurementSalt": "${saltB64}"\n}`,
    );
    expect((await stat(path)).mode & 0o777).toBe(0o600);
  });

  it('reads back what it wrote', async () => {
    const store = new JsonNodeStateStore({ path: join(tmp(), 'node_state.json') });
    await store.write({ role: 'Worker', measurementSalt: salt });
    expect(await store.read()).toEqual({ role: 'Worker', measurementSalt: salt });
  });

  it('file exists already', async () => {
    const path = join(tmp(), 'node_state.json');
    const store = new JsonNodeStateStore({ path });
    await store.write({ role: 'Worker', measurementSalt: salt });
    await expect(store.write({ role: 'ControlPlane', measurementSalt: salt })).rejects.toThrow(
      `writing node state: writing ${path}: file exists already`,
    );
    expect((await store.read())?.role).toBe('Worker');
  });

  it('reads nothing when no state was written', async () => {
    expect(
      await new JsonNodeStateStore({ path: join(tmp(), 'absent', 'node_state.json') }).read(),
    ).toBeUndefined();
  });

  it('leaves no file when the write fails half-way', async () => {
    const dir = tmp();
    const path = join(dir, 'node_state.json');
    const failing = new ExclusiveFileWriter({
      writeData: async (fh, data) => {
        await fh.write(data.subarray(0, 10));
        throw new Error('EIO: i/o error, write');
      },
    });
    await expect(
      new JsonNodeStateStore({ path, fileWriter: failing }).write({ role: 'Worker', measurementSalt: salt }),
    ).rejects.toThrow(/writing node state: writing .*: EIO/);
    expect(await new JsonNodeStateStore({ path }).read()).toBeUndefined();
  });

  it.each([
    ['ControlPlane', 'ControlPlane'],
    ['controlplane', 'ControlPlane'],
    ['control-plane', 'ControlPlane'],
    ['CONTROL-PLANE', 'ControlPlane'],
    ['Worker', 'Worker'],
    ['WORKER', 'Worker'],
    ['Unknown', 'Unknown'],
    ['admin', 'Unknown'],
    ['', 'Unknown'],
  ])('reads role %j as %s', async (role, expected) => {
    const dir = tmp();
    const path = join(dir, 'node_state.json');
    await writeFile(path, JSON.stringify({ Role: role, MeasurementSalt: saltB64 }));
    expect(await new JsonNodeStateStore({ path }).read()).toEqual({ role: expected, measurementSalt: salt });
  });

  it.each([
    ['not JSON', '{"Role": ', /node state is not JSON/],
    ['an array', '[]', /not a JSON object/],
    ['a numeric role', '{"Role": 1}', /Role is not a string/],
    ['URL-safe base64', '{"Role":"Worker","MeasurementSalt":"-_-_"}', /not standard base64/],
    ['unpadded base64', '{"Role":"Worker","MeasurementSalt":"AAA"}', /not standard base64/],
  ])('rejects %s, naming the file', async (_name, text, message) => {
    const dir = tmp();
    await mkdir(join(dir, 's'));
    const path = join(dir, 's', 'node_state.json');
    await writeFile(path, text);
    const err = await new JsonNodeStateStore({ path }).read().catch((e: unknown) => e);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).toContain(`reading node state ${path}`);
  });
});
