/**
 * Copies files into a directory for another user: each copy gets the given owner and mode, and
 * appears under its name only once complete (written under a temporary name beside it, then
 * renamed). Every source is read before anything is written, so a missing source leaves the
 * destination as it was. The contents are never logged (they are private keys).
 */
import { chmod, chown, mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, normalize } from 'node:path';

/** What {@link copyOwned} copies. */
export interface OwnedCopy {
  /** The source directory. */
  from: string;
  /** The destination directory (created if missing). */
  to: string;
  /** File names relative to both directories; may name subdirectories (`etcd/ca.key`). */
  files: readonly string[];
  uid: number;
  gid: number;
  /** Permission bits of each copy (e.g. 0o400). Directories it creates get 0o755. */
  mode: number;
}

/** A relative name that stays inside its directory. */
function checkedName(name: string): string {
  const n = normalize(name);
  if (name === '' || isAbsolute(name) || n === '..' || n.startsWith('../'))
    throw new Error(`file name ${JSON.stringify(name)} leaves its directory`);
  return n;
}

/** Copies `c.files` from `c.from` to `c.to`; returns the names copied. */
export async function copyOwned(c: OwnedCopy): Promise<string[]> {
  const names = c.files.map(checkedName);
  const contents: Buffer[] = [];
  for (const name of names) {
    try {
      contents.push(await readFile(join(c.from, name)));
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'unreadable';
      throw new Error(`reading ${join(c.from, name)}: ${code}; nothing was copied`);
    }
  }
  for (const [i, name] of names.entries()) {
    const dest = join(c.to, name);
    const temp = `${dest}.partial-${process.pid}`;
    await mkdir(dirname(dest), { recursive: true, mode: 0o755 });
    try {
      await writeFile(temp, contents[i] as Buffer, { mode: 0o600, flag: 'wx' });
      await chown(temp, c.uid, c.gid);
      await chmod(temp, c.mode);
      await rename(temp, dest);
    } catch (err) {
      await rm(temp, { force: true });
      const code = (err as NodeJS.ErrnoException).code ?? String(err);
      throw new Error(`writing ${dest}: ${code}`);
    }
  }
  for (const content of contents) content.fill(0);
  return names;
}
