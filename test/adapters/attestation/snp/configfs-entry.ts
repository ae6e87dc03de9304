/**
 * A configfs-tsm report entry laid out in a temp directory as the kernel lays out
 * /sys/kernel/config/tsm/report/<entry> (no TDX or SEV guest device exists on this machine).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Lays out an existing configfs-tsm entry in `root/name` as the kernel would after mkdir. */
export function fakeEntry(
  root: string,
  name: string,
  provider: string,
  outblob: Uint8Array,
  auxblob?: Uint8Array,
): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'provider'), `${provider}\n`);
  writeFileSync(join(dir, 'generation'), '1\n');
  writeFileSync(join(dir, 'outblob'), outblob);
  if (auxblob) writeFileSync(join(dir, 'auxblob'), auxblob);
  return dir;
}
