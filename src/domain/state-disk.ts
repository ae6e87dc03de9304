/**
 * Using the state disk from the flows: open it, do one thing, release it (a failed release is
 * logged, never thrown over the result), and mark it for reset after a failure past the node lock.
 */
import type { EncryptedDisk } from '../ports/encrypted-disk.js';
import { messageOf } from '../ports/errors.js';
import type { Logger } from '../ports/logger.js';

/** Opens the state disk, runs `fn`, and releases the disk again whatever `fn` did. */
export async function withStateDisk<T>(
  disk: Pick<EncryptedDisk, 'open'>,
  logger: Logger,
  fn: () => Promise<T>,
): Promise<T> {
  const release = await disk.open();
  try {
    return await fn();
  } finally {
    await release().catch((err: unknown) =>
      logger.warn('Failed to release state disk', { error: messageOf(err) }),
    );
  }
}

/**
 * Marks the state disk for reset (the node was marked with a cluster ID but did not finish joining
 * or initialising, so it must start over from a wiped disk). Resolves false, and logs, when that
 * fails too; never rejects.
 */
export async function markStateDiskForReset(
  disk: Pick<EncryptedDisk, 'open' | 'markDiskForReset'>,
  logger: Logger,
): Promise<boolean> {
  try {
    await withStateDisk(disk, logger, () => disk.markDiskForReset());
    logger.warn('Marked state disk for reset');
    return true;
  } catch (err) {
    logger.error('Failed to mark state disk for reset', { error: messageOf(err) });
    return false;
  }
}
