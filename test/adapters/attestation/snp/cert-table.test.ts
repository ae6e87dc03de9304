/**
 * The SEV-SNP certificate table: upstream's REAL AWS table (one VLEK entry) in ../shared/testvectors,
 * round trips through the encoder, and malformed tables.
 */
import { describe, expect, it } from 'vitest';
import {
  encodeSnpCertTable,
  guidBytes,
  parseSnpCertTable,
  SNP_CERT_TABLE_GUIDS,
} from '../../../../src/adapters/attestation/snp/cert-table.js';
import { describeVectors, vec } from './vectors.js';

describeVectors('parseSnpCertTable on the REAL AWS table', () => {
  it('finds the one VLEK entry at offset 48, byte for byte the extracted VLEK', () => {
    const table = parseSnpCertTable(vec('constellation/snp/attestation_vlek.certtable.bin'));
    expect(table.entries.map((e) => [e.guid, e.data.length])).toEqual([[SNP_CERT_TABLE_GUIDS.vlek, 1323]]);
    expect(
      Buffer.from(table.vlek ?? []).equals(vec('constellation/snp/attestation_vlek.signer_vlek.der')),
    ).toBe(true);
    expect([table.vcek, table.ask, table.ark]).toEqual([undefined, undefined, undefined]);
  });
});

describe('SNP certificate tables', () => {
  const vcek = Uint8Array.of(1, 2, 3);
  const ask = Uint8Array.of(4, 5);
  const unknown = '00000000-0000-0000-0000-000000000001';

  it('round-trips known and unknown entries; unknown ones only in entries', () => {
    const blob = encodeSnpCertTable([
      { guid: SNP_CERT_TABLE_GUIDS.vcek, data: vcek },
      { guid: unknown, data: Uint8Array.of(9) },
      { guid: SNP_CERT_TABLE_GUIDS.ask, data: ask },
    ]);
    expect(blob.length).toBe(4 * 24 + 6);
    const table = parseSnpCertTable(blob);
    expect([table.vcek, table.ask]).toEqual([vcek, ask]);
    expect(table.entries.map((e) => e.guid)).toEqual([
      SNP_CERT_TABLE_GUIDS.vcek,
      unknown,
      SNP_CERT_TABLE_GUIDS.ask,
    ]);
    expect(parseSnpCertTable(encodeSnpCertTable([])).entries).toEqual([]);
  });

  it('refuses a table without terminator, an empty or out-of-bounds entry, and a repeated GUID', () => {
    const one = encodeSnpCertTable([{ guid: SNP_CERT_TABLE_GUIDS.vcek, data: vcek }]);
    // One entry whose data follows it directly: no room for a terminator.
    const unterminated = Buffer.alloc(25);
    Buffer.from(guidBytes(SNP_CERT_TABLE_GUIDS.vcek)).copy(unterminated);
    unterminated.writeUInt32LE(24, 16);
    unterminated.writeUInt32LE(1, 20);
    expect(() => parseSnpCertTable(unterminated)).toThrow(
      'SNP certificate table: no terminating entry within 25 bytes (1 entries read)',
    );
    const empty = Buffer.from(one);
    empty.writeUInt32LE(0, 20);
    expect(() => parseSnpCertTable(empty)).toThrow(`entry ${SNP_CERT_TABLE_GUIDS.vcek} is empty`);
    const past = Buffer.from(one);
    past.writeUInt32LE(100, 20);
    expect(() => parseSnpCertTable(past)).toThrow(
      /\(offset 48, length 100\) ends past the table \(51 bytes\)$/,
    );
    const twice = encodeSnpCertTable([
      { guid: SNP_CERT_TABLE_GUIDS.ark, data: vcek },
      { guid: SNP_CERT_TABLE_GUIDS.ark, data: ask },
    ]);
    expect(() => parseSnpCertTable(twice)).toThrow(`entry ${SNP_CERT_TABLE_GUIDS.ark} appears twice`);
  });

  it('writes GUIDs in text byte order and refuses what is not a GUID', () => {
    expect(Buffer.from(guidBytes(SNP_CERT_TABLE_GUIDS.vlek)).toString('hex')).toBe(
      'a8074bc2a25a483eaae639c045a0b8a1',
    );
    expect(() => guidBytes('a8074bc2a25a483eaae639c045a0b8a1')).toThrow('is not a GUID');
  });
});
