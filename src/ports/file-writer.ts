/** Writes the node's credentials and CA files. */
export interface FileWriter {
  /**
   * Creates `path` exclusively (fails if it exists) with mode 0600, creating parent directories.
   * A failure leaves no half-written file behind.
   */
  writeExclusive(path: string, data: Uint8Array): Promise<void>;
}

/** DI token for {@link FileWriter}. */
export const FileWriter = Symbol.for('confboot.FileWriter');
