/**
 * copyOwned on the real file system: copies with the owner and mode asked for (as root; as another
 * user, with its own ids), creates subdirectories, writes nothing when any source is missing, leaves
 * no partial file when a write fails, and refuses names that leave their directory.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { copyOwned } from '../../../src/adapters/fs/owned-copy.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-owned-copy-');
const root = process.getuid?.() === 0;
const uid = root ? 65532 : (process.getuid?.() ?? 0);
const gid = root ? 65532 : (process.getgid?.() ?? 0);

function sources(names: string[]): string {
  const from = join(tmp(), 'from');
  for (const n of names) {
    mkdirSync(join(from, n, '..'), { recursive: true });
    writeFileSync(join(from, n), `secret ${n}`, { mode: 0o600 });
  }
  return from;
}

describe('copyOwned', () => {
  it('copies each file with the owner and mode, into subdirectories it creates', async () => {
    const from = sources(['ca.key', 'etcd/ca.key']);
    const to = join(tmp(), 'to');
    const copied = await copyOwned({ from, to, files: ['ca.key', 'etcd/ca.key'], uid, gid, mode: 0o440 });
    expect(copied).toEqual(['ca.key', 'etcd/ca.key']);
    for (const n of copied) {
      const st = statSync(join(to, n));
      expect([st.uid, st.gid, st.mode & 0o7777]).toEqual([uid, gid, 0o440]);
      expect(readFileSync(join(to, n), 'utf8')).toBe(`secret ${n}`);
    }
    expect(statSync(join(to, 'etcd')).mode & 0o777).toBe(0o755);
    // Nothing else is left beside the copies (no partial files).
    expect(readdirSync(to).sort()).toEqual(['ca.key', 'etcd']);
  });

  it('writes nothing when any source is missing, and names it', async () => {
    const from = sources(['a', 'b']);
    const to = join(tmp(), 'to');
    await expect(
      copyOwned({ from, to, files: ['a', 'missing', 'b'], uid, gid, mode: 0o400 }),
    ).rejects.toThrow(`reading ${join(from, 'missing')}: ENOENT; nothing was copied`);
    expect(existsSync(to)).toBe(false);
  });

  it('refuses names that leave their directory', async () => {
    const from = sources(['a']);
    for (const bad of ['../a', '/etc/passwd', '', 'x/../../a'])
      await expect(copyOwned({ from, to: tmp(), files: [bad], uid, gid, mode: 0o400 })).rejects.toThrow(
        /leaves its directory/,
      );
  });

  it.skipIf(root)(
    'leaves no partial file when it cannot give the copy away (not root: chown refused)',
    async () => {
      const from = sources(['a']);
      const to = tmp();
      await expect(copyOwned({ from, to, files: ['a'], uid: 0, gid: 0, mode: 0o400 })).rejects.toThrow(
        `writing ${join(to, 'a')}: EPERM`,
      );
      expect(readdirSync(to)).toEqual([]);
    },
  );

  it('leaves no partial file when the destination cannot be written', async () => {
    const from = sources(['a']);
    const to = tmp();
    // A directory where the copy should go: the rename over it fails.
    mkdirSync(join(to, 'a'));
    chmodSync(to, 0o755);
    await expect(copyOwned({ from, to, files: ['a'], uid, gid, mode: 0o400 })).rejects.toThrow(
      `writing ${join(to, 'a')}: EISDIR`,
    );
    expect(readdirSync(to)).toEqual(['a']);
  });
});
