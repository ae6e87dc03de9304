/**
 * The Authenticode digest of a PE/COFF image (Microsoft "Windows Authenticode Portable Executable
 * Signature Format"): what UEFI firmware extends into PCR 4 for an EFI application it loads, such
 * as an EFI-stub Linux kernel. Hashed: the headers without the CheckSum field and the Certificate
 * Table data-directory entry, then every section's raw data in file-offset order, then any data
 * after the last section up to the attribute certificate table.
 */
import { createHash } from 'node:crypto';

function fail(what: string): never {
  throw new Error(`PE image: ${what}`);
}

/** SHA-256 (or `hash`) Authenticode digest of `image`; throws on a malformed image. */
export function authenticodeDigest(image: Uint8Array, hash = 'sha256'): Buffer {
  const b = Buffer.from(image.buffer, image.byteOffset, image.byteLength);
  if (b.length < 0x40 || b.readUInt16LE(0) !== 0x5a4d) fail('no MZ header');
  const pe = b.readUInt32LE(0x3c);
  if (pe + 24 > b.length || b.readUInt32LE(pe) !== 0x00004550) fail('no PE signature');
  const numberOfSections = b.readUInt16LE(pe + 6);
  const sizeOfOptionalHeader = b.readUInt16LE(pe + 20);
  const opt = pe + 24;
  if (opt + sizeOfOptionalHeader > b.length) fail('optional header out of bounds');
  const magic = b.readUInt16LE(opt);
  const pe32plus = magic === 0x20b;
  if (!pe32plus && magic !== 0x10b) fail(`unknown optional header magic 0x${magic.toString(16)}`);
  const checksumOff = opt + 64;
  const sizeOfHeaders = b.readUInt32LE(opt + 60);
  const numberOfRvaAndSizes = b.readUInt32LE(opt + (pe32plus ? 108 : 92));
  const dirs = opt + (pe32plus ? 112 : 96);
  const certDirOff = dirs + 4 * 8;
  let certOffset = 0;
  let certSize = 0;
  if (numberOfRvaAndSizes > 4) {
    certOffset = b.readUInt32LE(certDirOff);
    certSize = b.readUInt32LE(certDirOff + 4);
  }
  if (sizeOfHeaders > b.length) fail('headers out of bounds');

  const h = createHash(hash);
  h.update(b.subarray(0, checksumOff));
  if (numberOfRvaAndSizes > 4) {
    h.update(b.subarray(checksumOff + 4, certDirOff));
    h.update(b.subarray(certDirOff + 8, sizeOfHeaders));
  } else {
    h.update(b.subarray(checksumOff + 4, sizeOfHeaders));
  }
  const secTable = opt + sizeOfOptionalHeader;
  const sections: { ptr: number; size: number }[] = [];
  for (let i = 0; i < numberOfSections; i++) {
    const s = secTable + i * 40;
    if (s + 40 > b.length) fail('section table out of bounds');
    const size = b.readUInt32LE(s + 16);
    const ptr = b.readUInt32LE(s + 20);
    if (size === 0) continue;
    if (ptr + size > b.length) fail(`section ${i} out of bounds`);
    sections.push({ ptr, size });
  }
  sections.sort((x, y) => x.ptr - y.ptr);
  let sumOfBytesHashed = sizeOfHeaders;
  for (const s of sections) {
    h.update(b.subarray(s.ptr, s.ptr + s.size));
    sumOfBytesHashed += s.size;
  }
  const end = certSize > 0 ? certOffset : b.length;
  if (end > b.length || (end < sumOfBytesHashed && certSize > 0)) fail('certificate table out of bounds');
  if (b.length > sumOfBytesHashed) h.update(b.subarray(sumOfBytesHashed, Math.max(sumOfBytesHashed, end)));
  return h.digest();
}
