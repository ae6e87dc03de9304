import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { readFilePrefix, readPrefix } from '../../../src/adapters/fs/read-prefix.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-read-prefix-');

describe('readFilePrefix / readPrefix', () => {
  it('reads a file up to the cap whole', async () => {
    const path = join(tmp(), 'f');
    await writeFile(path, 'abc');
    expect((await readFilePrefix(path, 3)).toString()).toBe('abc');
  });

  it('stops one byte past the cap, also on a file without an end (/dev/zero)', async () => {
    expect((await readFilePrefix('/dev/zero', 1000)).length).toBe(1001);
  });

  it('stops a stream once more than the cap arrived, without draining it', async () => {
    let pulled = 0;
    const endless = new Readable({
      read() {
        pulled++;
        this.push(Buffer.alloc(100));
      },
    });
    const got = await readPrefix(endless, 250);
    expect(got.length).toBeGreaterThan(250);
    expect(pulled).toBeLessThan(10);
    endless.destroy();
  });
});
