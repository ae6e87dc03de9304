/**
 * Reads a PEM file named by a command-line option (TLS certificates, keys, CAs), for the commands
 * that take them (key-service, join-service). A missing file or one without a PEM block is a usage
 * error naming the option and the path (exit 2).
 */
import { readFile } from 'node:fs/promises';
import { messageOf } from '../../ports/errors.js';
import { UsageError } from './args.js';

/** The bytes of the PEM file `path` given as `--<flag>`. @throws UsageError */
export async function readPemFlag(flag: string, path: string): Promise<Buffer> {
  let data: Buffer;
  try {
    data = await readFile(path);
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? messageOf(err);
    throw new UsageError(`--${flag}: reading ${path}: ${reason}`);
  }
  if (!data.includes('-----BEGIN ')) throw new UsageError(`--${flag}: ${path} holds no PEM block`);
  return data;
}
