/** In-memory FileWriter with exclusive-create semantics and injectable failures. */
import type { FileWriter } from '../../src/ports/file-writer.js';

export class FakeFileWriter implements FileWriter {
  readonly files = new Map<string, Uint8Array>();
  /** Paths whose write fails (nothing is stored). */
  readonly failOn = new Set<string>();

  async writeExclusive(path: string, data: Uint8Array): Promise<void> {
    if (this.failOn.has(path)) throw new Error(`writing ${path}: injected failure`);
    if (this.files.has(path)) throw new Error(`writing ${path}: file exists already`);
    this.files.set(path, new Uint8Array(data));
  }
}
