/**
 * The SSH wire encoding (RFC 4251 section 5) that emergency SSH needs: uint32, uint64 and
 * length-prefixed strings, written into one buffer and read back with bounds checks. SSH public
 * keys, OpenSSH certificates and signatures are built from these.
 */
import { ConfbootError } from '../ports/errors.js';

/** Builds an SSH wire-format byte string field by field. */
export class SshWriter {
  readonly #parts: Uint8Array[] = [];

  /** Appends a big-endian uint32. */
  uint32(n: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setUint32(0, n);
    this.#parts.push(b);
    return this;
  }

  /** Appends a big-endian uint64. */
  uint64(n: bigint): this {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt.asUintN(64, n));
    this.#parts.push(b);
    return this;
  }

  /** Appends a string: uint32 length, then the bytes (a JavaScript string as UTF-8). */
  string(value: Uint8Array | string): this {
    const b = typeof value === 'string' ? new TextEncoder().encode(value) : value;
    this.uint32(b.length);
    this.#parts.push(new Uint8Array(b));
    return this;
  }

  /** Appends bytes as they are (already encoded fields). */
  raw(value: Uint8Array): this {
    this.#parts.push(new Uint8Array(value));
    return this;
  }

  /** Everything written so far, as one array. */
  bytes(): Uint8Array {
    const out = new Uint8Array(this.#parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of this.#parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  }
}

/** Reads SSH wire-format fields in order; every read past the end throws `invalid-argument`. */
export class SshReader {
  readonly #data: Uint8Array;
  readonly #what: string;
  #at = 0;

  /** `what` names the data in errors ("host public key"). */
  constructor(data: Uint8Array, what: string) {
    this.#data = data;
    this.#what = what;
  }

  #take(n: number): Uint8Array {
    if (n > this.#data.length - this.#at)
      throw new ConfbootError('invalid-argument', `${this.#what}: truncated SSH encoding`);
    const out = this.#data.subarray(this.#at, this.#at + n);
    this.#at += n;
    return out;
  }

  /** A big-endian uint32. */
  uint32(): number {
    const b = this.#take(4);
    return new DataView(b.buffer, b.byteOffset, 4).getUint32(0);
  }

  /** A big-endian uint64. */
  uint64(): bigint {
    const b = this.#take(8);
    return new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0);
  }

  /** A string's bytes (a view into the data). */
  string(): Uint8Array {
    return this.#take(this.uint32());
  }

  /** A string as text; throws `invalid-argument` unless it is printable ASCII. */
  text(): string {
    const b = this.string();
    if (!b.every((c) => c >= 0x20 && c < 0x7f))
      throw new ConfbootError('invalid-argument', `${this.#what}: a name field is not printable ASCII`);
    return new TextDecoder().decode(b);
  }

  /** The bytes not read yet (a view). */
  rest(): Uint8Array {
    return this.#data.subarray(this.#at);
  }

  /** Throws `invalid-argument` when bytes are left over. */
  end(): void {
    if (this.#at !== this.#data.length)
      throw new ConfbootError('invalid-argument', `${this.#what}: trailing bytes after the SSH encoding`);
  }
}
