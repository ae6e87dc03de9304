/** The SSH wire encoding (RFC 4251 section 5): what is written reads back, and reads stay in bounds. */
import { describe, expect, it } from 'vitest';
import { SshReader, SshWriter } from '../../src/domain/ssh-wire.js';

describe('SSH wire encoding', () => {
  it('reads back uint32, uint64 and strings in order', () => {
    const data = new SshWriter()
      .uint32(0xdeadbeef)
      .uint64(2n ** 64n - 1n)
      .string('ssh-ed25519')
      .string(Uint8Array.from([1, 2]))
      .raw(Uint8Array.from([9]))
      .bytes();
    expect(Buffer.from(data.subarray(0, 4)).toString('hex')).toBe('deadbeef');
    const r = new SshReader(data, 'test');
    expect(r.uint32()).toBe(0xdeadbeef);
    expect(r.uint64()).toBe(2n ** 64n - 1n);
    expect(r.text()).toBe('ssh-ed25519');
    expect(r.string()).toEqual(Uint8Array.from([1, 2]));
    expect(r.rest()).toEqual(Uint8Array.from([9]));
    expect(() => r.end()).toThrow(/test: trailing bytes/);
  });

  it('refuses a string longer than the data, and a name that is not printable ASCII', () => {
    expect(() => new SshReader(Uint8Array.from([0, 0, 0, 5, 1]), 'key').string()).toThrow(/key: truncated/);
    expect(() => new SshReader(new SshWriter().string('a\nb').bytes(), 'key').text()).toThrow(/printable/);
  });
});
