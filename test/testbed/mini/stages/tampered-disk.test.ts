import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  flipBytes,
  type IntegrityLayout,
  tamperOffsets,
} from '../../../../src/testbed/mini/stages/tampered-disk.js';

describe('tamperOffsets (where the tampered-disk step flips bytes)', () => {
  // Two journal sections of 8 entry sectors and 16 data sectors each, then the protected area.
  const layout: IntegrityLayout = {
    segmentOffset: 16_384,
    journalFrom: 16_384 + 8 * 512,
    journalSections: 2,
    sectionSectors: 24,
    protectedFrom: 16_384 + (8 + 48) * 512,
    integrity: 'hmac(sha256)',
    blockBytes: 512,
  };
  const size = layout.protectedFrom + 3 * 512;
  const at = tamperOffsets(layout, size);

  it('flips every journal data sector, so a replayed journal cannot restore a block', () => {
    const journal = at.filter((o) => o < layout.protectedFrom);
    expect(journal).toHaveLength(2 * 16);
    expect(journal[0]).toBe(layout.journalFrom + 8 * 512 + 100);
    expect(journal[16]).toBe(layout.journalFrom + (24 + 8) * 512 + 100);
  });

  it('leaves the superblock, the journal entry sectors and every commit ID as they were', () => {
    for (const o of at) {
      expect(o).toBeGreaterThanOrEqual(layout.journalFrom);
      if (o < layout.protectedFrom) {
        const sector = Math.floor((o - layout.journalFrom) / 512);
        expect(sector % layout.sectionSectors).toBeGreaterThanOrEqual(8);
        expect(o % 512).toBeLessThan(512 - 8);
      }
    }
  });

  it('flips one byte in every integrity block of the protected area, ascending, nothing past the end', () => {
    const data = at.filter((o) => o >= layout.protectedFrom);
    expect(data).toEqual([0, 1, 2].map((b) => layout.protectedFrom + b * 512 + 100));
    expect(at).toEqual([...at].sort((a, b) => a - b));
    expect(Math.max(...at)).toBeLessThan(size);
  });
});

describe('flipBytes', () => {
  it('flips exactly the given bytes, across MiB windows, and nothing else', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'flip-'));
    try {
      const file = join(dir, 'disk.img');
      await writeFile(file, Buffer.alloc(3 * (1 << 20) + 7, 0xaa));
      const offsets = [0, 100, (1 << 20) - 1, 1 << 20, 2 * (1 << 20) + 600, 3 * (1 << 20) + 6];
      expect(await flipBytes(file, offsets)).toBe(offsets.length);
      const after = await readFile(file);
      const changed: [number, number][] = [];
      for (let i = 0; i < after.length; i++) if (after[i] !== 0xaa) changed.push([i, after[i] as number]);
      expect(changed).toEqual(offsets.map((o) => [o, 0xab]));
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
