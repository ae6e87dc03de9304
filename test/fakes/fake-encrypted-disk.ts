/**
 * In-memory EncryptedDisk with real behaviour: one keyslot whose passphrase changes only when the
 * initial passphrase it reads matches, a state-disk token, and open/release bookkeeping. It is the
 * reference implementation the EncryptedDisk contract suite runs against first.
 */
import { timingSafeEqual } from 'node:crypto';
import type { EncryptedDisk } from '../../src/ports/encrypted-disk.js';
import { ConfbootError } from '../../src/ports/errors.js';

/** Options for {@link FakeEncryptedDisk}. */
export interface FakeEncryptedDiskOptions {
  /** LUKS UUID as the "header" holds it (may be upper-case; the port lower-cases it). */
  uuid?: string;
  /** Keyslot 0's passphrase, also what the initial passphrase file holds. */
  initialPassphrase?: Uint8Array;
}

/** The state disk, in memory. */
export class FakeEncryptedDisk implements EncryptedDisk {
  /** The UUID stored in the fake header. */
  readonly headerUuid: string;
  /** What the "initial passphrase file" currently holds; `undefined` makes reading it fail. */
  initialPassphraseFile: Uint8Array | undefined;
  /** The state-disk token's `diskIsInitialized`, or undefined while no token exists. */
  diskIsInitialized: boolean | undefined;
  /** Set to make the next header validation fail (as a malicious header would). */
  headerError: Error | undefined;
  private keyslot0: Uint8Array;
  private openCount = 0;

  constructor(options: FakeEncryptedDiskOptions = {}) {
    this.headerUuid = options.uuid ?? 'C0FFEE00-1234-4abc-8def-0123456789AB';
    const initial = options.initialPassphrase ?? new Uint8Array(32).fill(7);
    this.keyslot0 = new Uint8Array(initial);
    this.initialPassphraseFile = new Uint8Array(initial);
  }

  /** Whether `key` opens keyslot 0 (what `cryptsetup open --test-passphrase` answers). */
  verifyPassphrase(key: Uint8Array): boolean {
    return key.length === this.keyslot0.length && timingSafeEqual(key, this.keyslot0);
  }

  /** Number of outstanding opens. */
  get openHandles(): number {
    return this.openCount;
  }

  async open(): Promise<() => Promise<void>> {
    if (this.headerError)
      throw new ConfbootError('failed-precondition', `opening state disk: ${this.headerError.message}`);
    this.openCount++;
    let released = false;
    return async () => {
      if (released) return;
      released = true;
      this.openCount--;
    };
  }

  async uuid(): Promise<string> {
    this.requireOpen('reading state disk UUID');
    return this.headerUuid.toLowerCase();
  }

  async updatePassphrase(passphrase: Uint8Array): Promise<void> {
    const op = 'updating passphrase of state disk';
    this.requireOpen(op);
    if (passphrase.length === 0)
      throw new ConfbootError('invalid-argument', `${op}: the new passphrase is empty`);
    const initial = this.initialPassphraseFile;
    if (initial === undefined) {
      throw new ConfbootError('failed-precondition', `${op}: reading initial passphrase: no such file`);
    }
    if (!this.verifyPassphrase(initial)) {
      throw new ConfbootError(
        'permission-denied',
        `${op}: changing keyslot 0: No key available with this passphrase.`,
      );
    }
    this.keyslot0 = new Uint8Array(passphrase);
    this.diskIsInitialized = true;
  }

  async markDiskForReset(): Promise<void> {
    this.requireOpen('marking state disk for reset');
    this.diskIsInitialized = false;
  }

  private requireOpen(op: string): void {
    if (this.openCount === 0)
      throw new ConfbootError('failed-precondition', `${op}: the state disk is not open`);
  }
}
