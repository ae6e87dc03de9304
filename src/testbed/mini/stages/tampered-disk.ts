/**
 * Step `tampered-disk` of `mini lifecycle`: the host changes a stopped worker's encrypted state disk
 * and the node must not use what it changed. The state disk is LUKS2 with authenticated encryption
 * (aes-xts-plain64 with HMAC-SHA256 tags kept by dm-integrity), so a sector whose ciphertext or tag
 * changed fails to read (EIO; the kernel logs `INTEGRITY AEAD ERROR`) instead of decrypting to
 * changed data. The host flips one byte in every integrity block (dm-integrity's sector, 512 bytes
 * here) of the protected area, the tags and the data after dm-integrity's superblock and journal,
 * and one byte of every data sector of the journal. The journal matters: the node was powered off
 * without closing its mapping, so the journal still holds the blocks written last (among them the
 * filesystem's superblock, rewritten at every mount), and activating the mapping replays them over
 * the data area. Left as it was, it restores exactly the blocks a mount reads first. The superblock
 * and the journal's entry sectors stay as they were, so the mapping itself still activates. On the
 * next boot the node gets its rejoin ticket, maps the disk, and its first read (the filesystem's
 * superblock, when it mounts the disk) fails. Checked: an I/O error in the node's log or the
 * kernel's AEAD error on its console, the marker never read back, PCR 15 still zero (the node lock
 * is only marked after the node state was read from the disk).
 */
import { open, readFile, stat } from 'node:fs/promises';
import { runCryptsetup } from '../../../adapters/disk/cryptsetup-runner.js';
import type { MiniCluster } from '../context.js';
import { type LifecycleStepResult, NODE_CMDLINE } from '../types.js';
import { bootstrapConfig } from './fleet.js';
import type { MiniSecrets } from './init.js';
import { failed } from './lifecycle-steps.js';
import { bootEvidence, secondsSince } from './node-evidence.js';

/** dm-integrity's on-disk constants (sectors of 512 bytes). */
const SB_SECTORS = 8;
const JOURNAL_BLOCK_SECTORS = 8;
const JOURNAL_SECTOR_DATA = 512 - 8;
const JOURNAL_MAC_PER_SECTOR = 8;
const SB_FLAG_HAVE_JOURNAL_MAC = 0x1;

/** Where the integrity-protected area of a LUKS2 disk with integrity starts, and how large the disk is. */
export interface IntegrityLayout {
  /** Byte offset of the data segment (dm-integrity's superblock). */
  segmentOffset: number;
  /** Byte offset of the first sector after dm-integrity's superblock and journal. */
  protectedFrom: number;
  /** The segment's integrity type, e.g. `hmac(sha256)`. */
  integrity: string;
  /** Byte offset of the journal (right after dm-integrity's superblock). */
  journalFrom: number;
  /** Journal sections, and sectors in each: first its entry sectors, then its data sectors. */
  journalSections: number;
  sectionSectors: number;
  /** dm-integrity's block (the unit a tag protects) in bytes. */
  blockBytes: number;
}

/**
 * Reads the layout from the LUKS2 metadata and dm-integrity's superblock (`integrt` magic, tag size,
 * journal sections, flags, sectors per block): the journal spans `journal_sections` sections of
 * `entries << log2(sectors per block) + 8` sectors, each journal sector holding
 * `(504 − MAC) / entry size` entries of `8 + 8·sectors per block + tag size` bytes rounded up to 8.
 */
export async function integrityLayout(image: string): Promise<IntegrityLayout> {
  const { stdout } = await runCryptsetup(['luksDump', '--dump-json-metadata', image], {
    timeoutInMs: 60_000,
  });
  const seg = (
    JSON.parse(stdout) as { segments: Record<string, { offset: string; integrity?: { type: string } }> }
  ).segments['0'];
  if (seg === undefined) throw new Error(`${image}: no data segment`);
  if (seg.integrity === undefined) throw new Error(`${image}: the data segment has no integrity protection`);
  const segmentOffset = Number(seg.offset);
  const fh = await open(image, 'r');
  const sb = Buffer.alloc(512);
  try {
    await fh.read(sb, 0, 512, segmentOffset);
  } finally {
    await fh.close();
  }
  if (sb.subarray(0, 7).toString('latin1') !== 'integrt')
    throw new Error(`${image}: no dm-integrity superblock at byte ${segmentOffset}`);
  const tagSize = sb.readUInt16LE(10);
  const journalSections = sb.readUInt32LE(12);
  const flags = sb.readUInt32LE(24);
  const log2SectorsPerBlock = sb.readUInt8(28);
  const entrySize = Math.ceil((8 + 8 * (1 << log2SectorsPerBlock) + tagSize) / 8) * 8;
  const space = JOURNAL_SECTOR_DATA - (flags & SB_FLAG_HAVE_JOURNAL_MAC ? JOURNAL_MAC_PER_SECTOR : 0);
  const sectionEntries = Math.floor(space / entrySize) * JOURNAL_BLOCK_SECTORS;
  const sectionSectors = (sectionEntries << log2SectorsPerBlock) + JOURNAL_BLOCK_SECTORS;
  const initialSectors = SB_SECTORS + sectionSectors * journalSections;
  return {
    segmentOffset,
    protectedFrom: segmentOffset + initialSectors * 512,
    integrity: seg.integrity.type,
    journalFrom: segmentOffset + SB_SECTORS * 512,
    journalSections,
    sectionSectors,
    blockBytes: 512 << log2SectorsPerBlock,
  };
}

/**
 * Byte 100 of every integrity block of the protected area, and of every journal data sector (a
 * journal sector keeps its commit ID in its last 8 bytes, which stay as they were); ascending.
 */
export function tamperOffsets(layout: IntegrityLayout, size: number): number[] {
  const at: number[] = [];
  for (let s = 0; s < layout.journalSections; s++)
    for (let i = JOURNAL_BLOCK_SECTORS; i < layout.sectionSectors; i++)
      at.push(layout.journalFrom + (s * layout.sectionSectors + i) * 512 + 100);
  for (let p = layout.protectedFrom + 100; p < size; p += layout.blockBytes) at.push(p);
  return at;
}

/** Flips one byte at each of the ascending `offsets` in `image`, a MiB at a time; returns how many. */
export async function flipBytes(image: string, offsets: number[]): Promise<number> {
  const fh = await open(image, 'r+');
  try {
    const buf = Buffer.alloc(1 << 20);
    for (let i = 0; i < offsets.length; ) {
      const start = offsets[i] as number;
      const { bytesRead } = await fh.read(buf, 0, buf.length, start);
      for (; i < offsets.length && (offsets[i] as number) < start + bytesRead; i++) {
        const k = (offsets[i] as number) - start;
        buf[k] = (buf[k] as number) ^ 0x01;
      }
      await fh.write(buf, 0, bytesRead, start);
    }
    await fh.sync();
    return offsets.length;
  } finally {
    await fh.close();
  }
}

/** Step `tampered-disk` of node `name` (see the module comment); the node is stopped afterwards. */
export async function tamperedDiskStep(
  c: MiniCluster,
  secrets: MiniSecrets,
  markers: Map<string, string>,
  name: string,
): Promise<LifecycleStepResult> {
  const started = Date.now();
  let layout: IntegrityLayout;
  let flipped: number;
  let ioError: string | undefined;
  let aeadError: string | undefined;
  try {
    await c.stopNode(name);
    layout = await integrityLayout(c.diskImage(name));
    const image = c.diskImage(name);
    flipped = await flipBytes(image, tamperOffsets(layout, (await stat(image)).size));
    c.progress(
      `${name.padEnd(16)} state disk changed on the host: one byte flipped in each of ${flipped} integrity blocks and journal sectors (${layout.integrity})`,
    );
    c.t0 = Date.now();
    const vm = await c.startNode(name, {
      cmdline: NODE_CMDLINE,
      config: { ...bootstrapConfig(c, c.node(name), false), stay: true },
    });
    const isIoError = (r: Record<string, unknown>) =>
      r.type === 'log' &&
      r.source === 'bootstrapper' &&
      /Input\/output error|I\/O error/i.test(String(r.line));
    await c.waitReport(vm, (r) => isIoError(r) || r.type === 'bootstrapper-exit' || r.type === 'marker');
    const line = c.reports(name).find(isIoError)?.line;
    if (line !== undefined) ioError = String(line);
    const console = await readFile(vm.consoleLog, 'utf8').catch(() => '');
    aeadError = /[^\n]*INTEGRITY AEAD ERROR[^\n]*/.exec(console)?.[0]?.trim();
    await c.stopNode(name);
  } catch (err) {
    return failed('tampered-disk', name, started, err);
  }
  const e = bootEvidence(c, name, secrets);
  const markerRead = c.reports(name).some((x) => x.type === 'marker' && x.marker === markers.get(name));
  const detected = ioError !== undefined || aeadError !== undefined;
  const ok = detected && !markerRead && e.pcr15 !== 'cluster-marker';
  c.progress(
    `${name.padEnd(16)} ${ok ? 'changed disk detected, nothing read from it' : 'tampered disk NOT detected'}: ${aeadError ?? ioError ?? '-'}`,
  );
  return {
    step: 'tampered-disk',
    node: name,
    ok,
    markerIntact: false,
    pcr15: e.pcr15,
    diskOpen: false,
    reason: ok
      ? `the host flipped one byte in each of ${flipped} integrity blocks and journal sectors of the ${layout.integrity}-protected disk; the node's read failed (${aeadError ?? ioError}) and it neither read its marker nor marked PCR 15`
      : `detected ${detected}, marker read back ${markerRead}, PCR 15 ${e.pcr15}; bootstrapper: ${e.bootstrapper ?? e.error ?? 'no outcome'}`,
    ...(aeadError === undefined ? {} : { kernel: aeadError }),
    ...(ioError === undefined ? {} : { bootstrapper: ioError }),
    seconds: secondsSince(started),
  };
}
