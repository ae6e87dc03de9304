/**
 * The SEV-SNP certificate table that comes with an extended guest report (configfs-tsm `auxblob`,
 * or the certificate buffer of `/dev/sev-guest`'s SNP_GET_EXT_REPORT). Where it sits: the SEV-SNP
 * issuers (issuers.ts) take the report signer (VCEK or VLEK) and the ASK from it.
 *
 * Layout: entries of 24 bytes — GUID (16 bytes, in the byte order of its text form, as the real
 * AWS table in the test vectors shows), offset (u32 LE, from the start of the table), length
 * (u32 LE) — ended by an entry whose GUID is all zero; each entry points at one DER certificate.
 */

/** The GUIDs of the certificates a host may put in the table. */
export const SNP_CERT_TABLE_GUIDS = {
  vcek: '63da758d-e664-4564-adc5-f4b93be8accd',
  vlek: 'a8074bc2-a25a-483e-aae6-39c045a0b8a1',
  ask: '4ab7b379-bbac-4fe4-a02f-05aef327c782',
  ark: 'c0b406a4-a803-4952-9743-3fb6014cd0ae',
} as const;

/** The certificate kinds of {@link SNP_CERT_TABLE_GUIDS}. */
export type SnpCertKind = keyof typeof SNP_CERT_TABLE_GUIDS;

/** One table entry. */
export interface SnpCertTableEntry {
  /** Lower-case GUID text, e.g. `a8074bc2-a25a-483e-aae6-39c045a0b8a1`. */
  guid: string;
  /** The entry's bytes (a DER certificate for the known GUIDs). */
  data: Uint8Array;
}

/** A parsed certificate table: the known certificates by kind, and every entry in order. */
export interface SnpCertTable {
  vcek?: Uint8Array;
  vlek?: Uint8Array;
  ask?: Uint8Array;
  ark?: Uint8Array;
  entries: SnpCertTableEntry[];
}

const ENTRY_SIZE = 24;
const KIND_BY_GUID = new Map<string, SnpCertKind>(
  Object.entries(SNP_CERT_TABLE_GUIDS).map(([kind, guid]) => [guid, kind as SnpCertKind]),
);

/** GUID bytes (text order) → `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`. */
function guidText(b: Uint8Array): string {
  const h = Buffer.from(b).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

/** `xxxxxxxx-xxxx-…` → its 16 bytes in text order. Throws on anything else. */
export function guidBytes(guid: string): Uint8Array {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(guid))
    throw new Error(`${JSON.stringify(guid)} is not a GUID`);
  return Uint8Array.from(Buffer.from(guid.replaceAll('-', ''), 'hex'));
}

/**
 * Parses a certificate table. Throws when the terminator is missing, an entry points outside the
 * table or is empty, or a GUID appears twice. Unknown GUIDs are kept in `entries` only.
 */
export function parseSnpCertTable(blob: Uint8Array): SnpCertTable {
  const dv = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
  const table: SnpCertTable = { entries: [] };
  const seen = new Set<string>();
  for (let i = 0; ; i++) {
    const at = i * ENTRY_SIZE;
    if (at + ENTRY_SIZE > blob.length)
      throw new Error(
        `SNP certificate table: no terminating entry within ${blob.length} bytes (${i} entries read)`,
      );
    const guidRaw = blob.subarray(at, at + 16);
    if (guidRaw.every((b) => b === 0)) break;
    const guid = guidText(guidRaw);
    const offset = dv.getUint32(at + 16, true);
    const length = dv.getUint32(at + 20, true);
    if (length === 0) throw new Error(`SNP certificate table: entry ${guid} is empty`);
    if (offset + length > blob.length)
      throw new Error(
        `SNP certificate table: entry ${guid} (offset ${offset}, length ${length}) ends past the table (${blob.length} bytes)`,
      );
    if (seen.has(guid)) throw new Error(`SNP certificate table: entry ${guid} appears twice`);
    seen.add(guid);
    const data = Uint8Array.from(blob.subarray(offset, offset + length));
    table.entries.push({ guid, data });
    const kind = KIND_BY_GUID.get(guid);
    if (kind !== undefined) table[kind] = data;
  }
  return table;
}

/**
 * Builds a certificate table (the host's side of the format): the entries, a zero terminator, then
 * the data. For hosts and test doubles of the firmware; guests only parse.
 */
export function encodeSnpCertTable(entries: readonly SnpCertTableEntry[]): Uint8Array {
  const header = (entries.length + 1) * ENTRY_SIZE;
  const size = entries.reduce((n, e) => n + e.data.length, header);
  const out = new Uint8Array(size);
  const dv = new DataView(out.buffer);
  let offset = header;
  entries.forEach((e, i) => {
    out.set(guidBytes(e.guid), i * ENTRY_SIZE);
    dv.setUint32(i * ENTRY_SIZE + 16, offset, true);
    dv.setUint32(i * ENTRY_SIZE + 20, e.data.length, true);
    out.set(e.data, offset);
    offset += e.data.length;
  });
  return out;
}
