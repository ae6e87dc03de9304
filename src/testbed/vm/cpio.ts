/**
 * A deterministic cpio archive writer in the "newc" format (magic 070701), the format the Linux
 * kernel unpacks as an initramfs. Every entry gets uid/gid 0, mtime 0 and an inode number from its
 * position, and entries are written in the order given, so the same inputs always give the same
 * bytes — the initramfs digest the firmware measures is reproducible from the inputs.
 */

/** One archive entry. Directories must precede their contents. */
export type CpioEntry =
  | { type: 'dir'; path: string; mode?: number }
  | { type: 'file'; path: string; data: Uint8Array; mode?: number }
  | { type: 'symlink'; path: string; target: string };

const S_IFDIR = 0o040000;
const S_IFREG = 0o100000;
const S_IFLNK = 0o120000;

function hex8(n: number): string {
  return n.toString(16).padStart(8, '0');
}

function pad4(n: number): number {
  return (4 - (n % 4)) % 4;
}

function header(ino: number, mode: number, nlink: number, size: number, name: string): Buffer {
  const nameBytes = Buffer.from(`${name}\0`, 'utf8');
  const fields = [
    '070701',
    hex8(ino),
    hex8(mode),
    hex8(0), // uid
    hex8(0), // gid
    hex8(nlink),
    hex8(0), // mtime
    hex8(size),
    hex8(0), // devmajor
    hex8(0), // devminor
    hex8(0), // rdevmajor
    hex8(0), // rdevminor
    hex8(nameBytes.length),
    hex8(0), // check
  ].join('');
  const head = Buffer.concat([Buffer.from(fields, 'latin1'), nameBytes]);
  return Buffer.concat([head, Buffer.alloc(pad4(head.length))]);
}

function checkPath(path: string): string {
  const p = path.replace(/^\/+/, '');
  if (p === '' || p.split('/').some((s) => s === '' || s === '.' || s === '..'))
    throw new Error(`cpio: bad entry path ${JSON.stringify(path)}`);
  return p;
}

/**
 * Writes `entries` as one newc archive (with the `TRAILER!!!` entry) and returns its chunks in
 * order; concatenated they are the archive. Throws on a bad or duplicate path.
 */
export function writeCpio(entries: readonly CpioEntry[]): Buffer[] {
  const out: Buffer[] = [];
  const seen = new Set<string>();
  let ino = 1;
  for (const e of entries) {
    const path = checkPath(e.path);
    if (seen.has(path)) throw new Error(`cpio: duplicate entry ${path}`);
    seen.add(path);
    if (e.type === 'dir') {
      out.push(header(ino++, S_IFDIR | (e.mode ?? 0o755), 2, 0, path));
    } else if (e.type === 'symlink') {
      const target = Buffer.from(e.target, 'utf8');
      out.push(
        header(ino++, S_IFLNK | 0o777, 1, target.length, path),
        target,
        Buffer.alloc(pad4(target.length)),
      );
    } else {
      const data = Buffer.from(e.data.buffer, e.data.byteOffset, e.data.byteLength);
      out.push(
        header(ino++, S_IFREG | (e.mode ?? 0o644), 1, data.length, path),
        data,
        Buffer.alloc(pad4(data.length)),
      );
    }
  }
  out.push(header(0, 0, 1, 0, 'TRAILER!!!'));
  return out;
}
