/** CryptsetupDisk on real LUKS2 image files runs the EncryptedDisk contract. */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CryptsetupDisk } from '../../../src/adapters/disk/cryptsetup-disk.js';
import { describeEncryptedDiskContract } from '../../contract/encrypted-disk.js';
import { dumpMetadata, formatImage, verifyPassphrase } from './luks-image.js';

describeEncryptedDiskContract('CryptsetupDisk (real cryptsetup, LUKS2 image file)', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'confboot-disk-'));
  const image = await formatImage(dir);
  const disk = new CryptsetupDisk({
    devicePath: image.path,
    initialPassphrasePath: image.keyFile,
    pbkdf: { type: 'pbkdf2', forceIterations: 1000 },
  });
  return {
    subject: disk,
    seed: {
      initialPassphrase: image.initialPassphrase,
      verifyPassphrase: (key) => verifyPassphrase(image.path, key),
      diskIsInitialized: async () => {
        const tokens = (await dumpMetadata(image.path)).tokens as Record<
          string,
          { diskIsInitialized?: boolean }
        >;
        return tokens['0']?.diskIsInitialized;
      },
      useWrongInitialPassphrase: async () => {
        await rm(image.keyFile, { force: true });
        await writeFile(image.keyFile, new Uint8Array(32).fill(1), { mode: 0o400 });
      },
    },
    cleanup: () => rm(dir, { recursive: true, force: true }),
    supports: { wrongInitialPassphrase: true },
  };
});
