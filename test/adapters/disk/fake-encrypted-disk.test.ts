/** The in-memory FakeEncryptedDisk runs the EncryptedDisk contract first, as its reference. */
import { describeEncryptedDiskContract } from '../../contract/encrypted-disk.js';
import { FakeEncryptedDisk } from '../../fakes/fake-encrypted-disk.js';

describeEncryptedDiskContract('FakeEncryptedDisk (in memory)', async () => {
  const initialPassphrase = new Uint8Array(32).fill(42);
  const disk = new FakeEncryptedDisk({ initialPassphrase, uuid: 'ABCDEF01-2345-4678-9ABC-DEF012345678' });
  return {
    subject: disk,
    seed: {
      initialPassphrase,
      verifyPassphrase: async (key) => disk.verifyPassphrase(key),
      diskIsInitialized: async () => disk.diskIsInitialized,
      useWrongInitialPassphrase: async () => {
        disk.initialPassphraseFile = new Uint8Array(32).fill(1);
      },
    },
    cleanup: async () => {},
    supports: { wrongInitialPassphrase: true },
  };
});
