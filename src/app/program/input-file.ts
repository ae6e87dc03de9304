/**
 * Reads an input file a command-line option names (an attestation document, a report, an event log,
 * a measurements config, a secret file), for every command that takes one: at most `maxBytes`
 * (default 64 MiB) by reading rather than trusting the file's size — sysfs files such as
 * binary_bios_measurements report size 0, and a device like /dev/zero never ends. A file that
 * cannot be read or is too large is a usage error naming what it is and its path (exit 2).
 */
import { readFilePrefix } from '../../adapters/fs/read-prefix.js';
import { messageOf } from '../../ports/errors.js';
import { UsageError } from './args.js';

/** Default bound: real event logs are tens of kB, a TDX CCEL area 256 KiB to a few MiB. */
export const MAX_INPUT_FILE_BYTES = 64 * 1024 * 1024;

const size = (bytes: number) =>
  bytes % (1024 * 1024) === 0 ? `${bytes / 1024 / 1024} MiB` : `${bytes} bytes`;

/**
 * The bytes of the file `path`, which is the command's `what` (e.g. `event log`, or the option's
 * name). @throws UsageError `reading <what> <path>: <cause>`, or `<what> <path> is larger than …`
 */
export async function readInput(
  path: string,
  what: string,
  options: { maxBytes?: number } = {},
): Promise<Buffer> {
  const max = options.maxBytes ?? MAX_INPUT_FILE_BYTES;
  let data: Buffer;
  try {
    data = await readFilePrefix(path, max);
  } catch (err) {
    throw new UsageError(`reading ${what} ${path}: ${messageOf(err)}`);
  }
  if (data.length > max) throw new UsageError(`${what} ${path} is larger than ${size(max)}`);
  return data;
}
