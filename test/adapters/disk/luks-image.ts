/**
 * Test support for the state disk: real LUKS2 image files made by the real cryptsetup with fast
 * PBKDF2 settings (never Argon2 defaults in tests), passphrase checks through
 * `cryptsetup open --test-passphrase`, and a header forger that rewrites the LUKS2 JSON area of both
 * header copies and recomputes their checksums — what a malicious host can do to a state disk.
 *
 * LUKS2 binary header (one per copy, big-endian): magic[6] @0, version u16 @6, hdr_size u64 @8,
 * seqid u64 @16, label[48] @24, csum_alg[32] @72, salt[64] @104, uuid[40] @168, subsystem[48] @208,
 * hdr_offset u64 @256, padding, csum[64] @448; the JSON area follows at 4096 up to hdr_size. The
 * checksum is the csum_alg digest over all hdr_size bytes with the csum field zeroed. The second copy
 * starts at hdr_size.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { open, truncate, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Fast PBKDF arguments for every cryptsetup call in tests. */
export const FAST_PBKDF = ['--pbkdf', 'pbkdf2', '--pbkdf-force-iterations', '1000'];

/** Runs cryptsetup, resolving to its exit code and output; never rejects on a non-zero exit. */
export function cryptsetup(
  args: string[],
  stdin: Uint8Array | string = '',
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('cryptsetup', args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    let stdout = '';
    let stderr = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString();
    });
    child.stderr.on('data', (b: Buffer) => {
      stderr += b.toString();
    });
    child.stdin.on('error', () => {});
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
    child.stdin.end(stdin);
  });
}

/** Runs cryptsetup and rejects unless it exits 0. */
export async function mustCryptsetup(args: string[], stdin: Uint8Array | string = ''): Promise<string> {
  const r = await cryptsetup(args, stdin);
  if (r.code !== 0) throw new Error(`cryptsetup ${args.join(' ')} exited with ${r.code}: ${r.stderr.trim()}`);
  return r.stdout;
}

/** A formatted LUKS2 image and the file holding its initial passphrase. */
export interface LuksImage {
  path: string;
  keyFile: string;
  initialPassphrase: Uint8Array;
}

/** Creates `dir/name` (32 MiB sparse) and luksFormats it as LUKS2 with a random 32-byte passphrase. */
export async function formatImage(
  dir: string,
  options: { name?: string; sizeMiB?: number; extraArgs?: string[]; passphrase?: Uint8Array } = {},
): Promise<LuksImage> {
  const path = join(dir, options.name ?? 'state.img');
  const keyFile = join(dir, `${options.name ?? 'state'}.key`);
  const initialPassphrase =
    options.passphrase ??
    new Uint8Array(createHash('sha256').update(path).update(String(Math.random())).digest());
  await writeFile(path, '');
  await truncate(path, (options.sizeMiB ?? 32) * 1024 * 1024);
  await writeFile(keyFile, initialPassphrase, { mode: 0o400 });
  await mustCryptsetup([
    'luksFormat',
    '--batch-mode',
    '--type',
    'luks2',
    ...FAST_PBKDF,
    ...(options.extraArgs ?? []),
    '--key-file',
    keyFile,
    path,
  ]);
  return { path, keyFile, initialPassphrase };
}

/** Whether `key` unlocks the image (`cryptsetup open --test-passphrase`, key on stdin). */
export async function verifyPassphrase(path: string, key: Uint8Array): Promise<boolean> {
  const r = await cryptsetup(['open', '--test-passphrase', '--key-file', '-', path], key);
  if (r.code === 0) return true;
  if (r.code === 2) return false;
  throw new Error(`cryptsetup open --test-passphrase exited with ${r.code}: ${r.stderr.trim()}`);
}

/** The LUKS2 JSON metadata as cryptsetup reads it. */
export async function dumpMetadata(path: string): Promise<Record<string, unknown>> {
  return JSON.parse(await mustCryptsetup(['luksDump', '--dump-json-metadata', path])) as Record<
    string,
    unknown
  >;
}

/** Adds a keyslot with passphrase `newKey`, unlocking with `keyFile`. */
export async function addKey(path: string, keyFile: string, newKey: Uint8Array): Promise<void> {
  await mustCryptsetup(
    ['luksAddKey', '--batch-mode', ...FAST_PBKDF, '--key-file', keyFile, path, '-'],
    newKey,
  );
}

/** Imports `token` as LUKS2 token `id`. */
export async function importToken(path: string, id: number, token: object): Promise<void> {
  await mustCryptsetup(
    ['token', 'import', '--token-id', String(id), '--token-replace', path],
    JSON.stringify(token),
  );
}

// biome-ignore lint/suspicious/noExplicitAny: the forger edits arbitrary LUKS2 JSON.
type AnyJson = any;

/**
 * Rewrites the JSON metadata of both header copies with `mutate`, then recomputes each copy's
 * checksum, as a host controlling the disk can. cryptsetup then reads the forged metadata.
 */
export async function forgeMetadata(path: string, mutate: (json: AnyJson) => void): Promise<void> {
  await forgeHeader(path, mutate, () => {});
}

/** Writes `uuid` (verbatim, e.g. upper-case) into both binary headers, recomputing their checksums. */
export async function forgeUuid(path: string, uuid: string): Promise<void> {
  await forgeHeader(
    path,
    () => {},
    (hdr) => {
      hdr.fill(0, 168, 208);
      hdr.write(uuid, 168, 'latin1');
    },
  );
}

async function forgeHeader(
  path: string,
  mutate: (json: AnyJson) => void,
  mutateBinary: (hdr: Buffer) => void,
): Promise<void> {
  const fh = await open(path, 'r+');
  try {
    const fixed = Buffer.alloc(16);
    await fh.read(fixed, 0, 16, 0);
    if (fixed.subarray(0, 6).toString('latin1') !== 'LUKS\xba\xbe') throw new Error('not a LUKS image');
    const hdrSize = Number(fixed.readBigUInt64BE(8));
    for (const offset of [0, hdrSize]) {
      const hdr = Buffer.alloc(hdrSize);
      await fh.read(hdr, 0, hdrSize, offset);
      const csumAlg = hdr.subarray(72, 104).toString('latin1').replace(/\0+$/, '');
      if (csumAlg !== 'sha256') throw new Error(`unexpected checksum algorithm ${csumAlg}`);
      const jsonText = hdr.subarray(4096).toString('utf8').replace(/\0+$/, '');
      const json = JSON.parse(jsonText) as AnyJson;
      mutate(json);
      const raw = Buffer.from(JSON.stringify(json), 'utf8');
      if (raw.length >= hdrSize - 4096) throw new Error('forged JSON does not fit the JSON area');
      hdr.fill(0, 4096);
      raw.copy(hdr, 4096);
      mutateBinary(hdr);
      hdr.fill(0, 448, 512);
      createHash('sha256').update(hdr).digest().copy(hdr, 448);
      await fh.write(hdr, 0, hdrSize, offset);
    }
  } finally {
    await fh.close();
  }
}
