/**
 * Bounded reads of input whose size the reader does not control (a file an operator names, stdin):
 * at most one byte past the cap is read, so the caller can refuse a larger input without ever
 * holding it whole — which also holds for a file without an end, such as /dev/zero.
 */
import { createReadStream } from 'node:fs';

/** The first bytes of `stream`, stopping once more than `max` arrived (the result is then longer than `max`). */
export async function readPrefix(stream: AsyncIterable<unknown>, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    const b = chunk as Buffer;
    total += b.length;
    chunks.push(b);
    if (total > max) break;
  }
  return Buffer.concat(chunks);
}

/** The first `max + 1` bytes of the file at `path` at most: longer than `max` means the file is. */
export function readFilePrefix(path: string, max: number): Promise<Buffer> {
  return readPrefix(createReadStream(path, { end: max }), max);
}
