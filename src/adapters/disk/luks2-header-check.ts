/**
 * State disk, header check: applies the {@link Luks2HeaderPolicy} to LUKS2 JSON metadata (as printed
 * by `cryptsetup luksDump --dump-json-metadata`) before confboot touches the disk: the data segment's
 * cipher and integrity, the keyslots' ciphers and KDFs within bounds, every area inside the device
 * and apart from the others, digests and tokens.
 *
 * Pure: no I/O. Every refusal is a {@link Luks2HeaderError} naming the check that failed; nothing else
 * is ever thrown, whatever JSON value it is given.
 */
import {
  DEFAULT_LUKS2_HEADER_POLICY,
  type Luks2Area,
  type Luks2HeaderCheck,
  Luks2HeaderError,
  type Luks2HeaderPolicy,
  type Luks2HeaderSummary,
  STATE_DISK_TOKEN_TYPE,
} from './luks2-header-policy.js';

type Json = Record<string, unknown>;

function fail(check: Luks2HeaderCheck, detail: string): never {
  throw new Luks2HeaderError(check, detail);
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function field(obj: Json, key: string, check: Luks2HeaderCheck, where: string): Json {
  const v = obj[key];
  if (!isObject(v)) fail(check, `${where}.${key} is not an object`);
  return v;
}

function str(obj: Json, key: string, check: Luks2HeaderCheck, where: string): string {
  const v = obj[key];
  if (typeof v !== 'string') fail(check, `${where}.${key} is not a string`);
  return v;
}

function int(obj: Json, key: string, check: Luks2HeaderCheck, where: string): number {
  const v = obj[key];
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    fail(check, `${where}.${key} is not a non-negative integer`);
  }
  return v;
}

/** LUKS2 writes 64-bit sizes as decimal strings. */
function u64(obj: Json, key: string, check: Luks2HeaderCheck, where: string): number {
  const v = obj[key];
  if (typeof v !== 'string' || !/^\d{1,16}$/.test(v)) fail(check, `${where}.${key} is not a decimal size`);
  const n = Number(v);
  if (!Number.isSafeInteger(n)) fail(check, `${where}.${key} is too large`);
  return n;
}

/** Object keys that are LUKS2 IDs (decimal, small), sorted; any other key fails `check`. */
function ids(obj: Json, check: Luks2HeaderCheck, where: string): number[] {
  return Object.keys(obj)
    .map((k) => {
      if (!/^\d{1,2}$/.test(k)) fail(check, `${where} has an invalid id ${JSON.stringify(k).slice(0, 40)}`);
      return Number(k);
    })
    .sort((a, b) => a - b);
}

function inRange(v: number, r: { min: number; max: number }): boolean {
  return v >= r.min && v <= r.max;
}

function show(v: unknown): string {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return JSON.stringify((s ?? String(v)).slice(0, 64));
}

function checkPbkdf2(kdf: Json, policy: Luks2HeaderPolicy, check: Luks2HeaderCheck, where: string): void {
  const hash = str(kdf, 'hash', check, where);
  if (!policy.hashes.includes(hash))
    fail(check, `${where} uses hash ${show(hash)}, allowed: ${policy.hashes.join(', ')}`);
  const iterations = int(kdf, 'iterations', check, where);
  const r = policy.kdfBounds.pbkdf2Iterations;
  if (!inRange(iterations, r))
    fail(check, `${where} has ${iterations} pbkdf2 iterations, allowed ${r.min}..${r.max}`);
  str(kdf, 'salt', check, where);
}

function checkKdf(kdf: Json, policy: Luks2HeaderPolicy, where: string): void {
  const type = str(kdf, 'type', 'kdf', where);
  if (!policy.kdfTypes.includes(type))
    fail('kdf', `${where} is ${show(type)}, allowed: ${policy.kdfTypes.join(', ')}`);
  if (type === 'pbkdf2') {
    checkPbkdf2(kdf, policy, 'kdf', where);
    return;
  }
  if (type === 'argon2i' || type === 'argon2id') {
    const b = policy.kdfBounds;
    const time = int(kdf, 'time', 'kdf', where);
    const memory = int(kdf, 'memory', 'kdf', where);
    const cpus = int(kdf, 'cpus', 'kdf', where);
    if (!inRange(time, b.argon2Time))
      fail('kdf', `${where} has argon2 time ${time}, allowed ${b.argon2Time.min}..${b.argon2Time.max}`);
    if (!inRange(memory, b.argon2MemoryKiB)) {
      fail(
        'kdf',
        `${where} has argon2 memory ${memory} KiB, allowed ${b.argon2MemoryKiB.min}..${b.argon2MemoryKiB.max}`,
      );
    }
    if (!inRange(cpus, b.argon2Cpus))
      fail('kdf', `${where} has argon2 cpus ${cpus}, allowed ${b.argon2Cpus.min}..${b.argon2Cpus.max}`);
    str(kdf, 'salt', 'kdf', where);
    return;
  }
  fail('kdf', `${where} is ${show(type)}, which confboot cannot bound`);
}

function overlaps(a: Luks2Area, b: Luks2Area): boolean {
  return a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

/** The header layout from `config`: where the two metadata copies and the keyslots area end. */
interface HeaderLayout {
  headersEnd: number;
  keyslotsEnd: number;
}

/** `config`: a LUKS2 metadata size, no requirements, metadata and keyslots inside the device. */
function checkConfig(config: Json, deviceSizeBytes: number): HeaderLayout {
  // The binary header plus its JSON area is 4 KiB + json_size; two copies precede the keyslots area.
  const jsonSize = u64(config, 'json_size', 'config', 'config');
  const keyslotsSize = u64(config, 'keyslots_size', 'config', 'config');
  if (jsonSize < 12 * 1024 || jsonSize > 4 * 1024 * 1024 - 4096 || jsonSize % 4096 !== 0) {
    fail('config', `json_size ${jsonSize} is not a LUKS2 metadata size`);
  }
  if (config.requirements !== undefined) {
    fail('config', 'header carries requirements (e.g. an unfinished reencryption); confboot refuses them');
  }
  const headersEnd = 2 * (jsonSize + 4096);
  const keyslotsEnd = headersEnd + keyslotsSize;
  if (keyslotsEnd > deviceSizeBytes) {
    fail(
      'config',
      `metadata and keyslots end at ${keyslotsEnd}, beyond the device (${deviceSizeBytes} bytes)`,
    );
  }
  return { headersEnd, keyslotsEnd };
}

/** The data segment once its shape passed. */
interface Segment {
  ids: number[];
  seg: Json;
  sectorSize: number;
  integrity: string | null;
}

/**
 * The data segment, the check that matters most: exactly one (several only exist during
 * reencryption), type crypt, an allowed cipher and integrity, a valid sector size, no flags.
 */
function checkSegment(segments: Json, policy: Luks2HeaderPolicy): Segment {
  const segIds = ids(segments, 'segment-count', 'segments');
  if (segIds.length !== 1 || segIds[0] !== 0)
    fail('segment-count', `segments [${segIds.join(', ')}], expected exactly segment 0`);
  const seg = field(segments, '0', 'segment-type', 'segments');
  const segType = str(seg, 'type', 'segment-type', 'segment 0');
  if (segType !== 'crypt') fail('segment-type', `segment 0 has type ${show(segType)}, expected "crypt"`);
  const segCipher = str(seg, 'encryption', 'segment-cipher', 'segment 0');
  if (!policy.segmentCiphers.includes(segCipher)) {
    fail('segment-cipher', `segment 0 uses ${show(segCipher)}, allowed: ${policy.segmentCiphers.join(', ')}`);
  }
  let integrity: string | null = null;
  if (seg.integrity !== undefined) {
    const integ = field(seg, 'integrity', 'segment-cipher', 'segment 0');
    integrity = str(integ, 'type', 'segment-cipher', 'segment 0 integrity');
  }
  if (!policy.segmentIntegrity.includes(integrity)) {
    fail('segment-cipher', `segment 0 integrity ${show(integrity ?? 'none')} is not allowed`);
  }
  const sectorSize = int(seg, 'sector_size', 'segment-type', 'segment 0');
  if (![512, 1024, 2048, 4096].includes(sectorSize))
    fail('segment-type', `segment 0 sector size ${sectorSize} is invalid`);
  if (seg.flags !== undefined)
    fail('segment-type', 'segment 0 carries flags (e.g. a reencryption in progress)');
  return { ids: segIds, seg, sectorSize, integrity };
}

/** One keyslot: luks2 with the luks1 splitter, an allowed raw area cipher, a bounded KDF, its area inside the keyslots area. */
function checkKeyslot(
  id: number,
  keyslots: Json,
  policy: Luks2HeaderPolicy,
  layout: HeaderLayout,
  deviceSizeBytes: number,
): Luks2Area {
  const where = `keyslot ${id}`;
  const slot = field(keyslots, String(id), 'keyslot-type', 'keyslots');
  const type = str(slot, 'type', 'keyslot-type', where);
  if (type !== 'luks2') fail('keyslot-type', `${where} has type ${show(type)}, expected "luks2"`);
  int(slot, 'key_size', 'keyslot-type', where);
  const af = field(slot, 'af', 'keyslot-type', where);
  if (af.type !== 'luks1')
    fail('keyslot-type', `${where} has anti-forensic type ${show(af.type)}, expected "luks1"`);
  const afHash = str(af, 'hash', 'keyslot-type', `${where} af`);
  if (!policy.hashes.includes(afHash)) fail('keyslot-type', `${where} af uses hash ${show(afHash)}`);
  const stripes = int(af, 'stripes', 'keyslot-type', `${where} af`);
  if (stripes !== 4000) fail('keyslot-type', `${where} af has ${stripes} stripes, expected 4000`);

  const area = field(slot, 'area', 'keyslot-cipher', where);
  if (area.type !== 'raw')
    fail('keyslot-cipher', `${where} area has type ${show(area.type)}, expected "raw"`);
  const cipher = str(area, 'encryption', 'keyslot-cipher', `${where} area`);
  if (!policy.keyslotCiphers.includes(cipher)) {
    fail(
      'keyslot-cipher',
      `${where} area uses ${show(cipher)}, allowed: ${policy.keyslotCiphers.join(', ')}`,
    );
  }

  checkKdf(field(slot, 'kdf', 'kdf', where), policy, `${where} kdf`);

  const offset = u64(area, 'offset', 'keyslot-area', `${where} area`);
  const size = u64(area, 'size', 'keyslot-area', `${where} area`);
  if (size === 0) fail('keyslot-area', `${where} area is empty`);
  if (offset + size > deviceSizeBytes) {
    fail(
      'keyslot-area',
      `${where} area [${offset}, ${offset + size}) is beyond the device (${deviceSizeBytes} bytes)`,
    );
  }
  if (offset < layout.headersEnd || offset + size > layout.keyslotsEnd) {
    fail(
      'keyslot-area',
      `${where} area [${offset}, ${offset + size}) is outside the keyslots area [${layout.headersEnd}, ${layout.keyslotsEnd})`,
    );
  }
  return { name: where, offset, size };
}

/** At most `maxKeyslots` keyslots, keyslot 0 among them, each passing {@link checkKeyslot}. */
function checkKeyslots(
  keyslots: Json,
  policy: Luks2HeaderPolicy,
  layout: HeaderLayout,
  deviceSizeBytes: number,
): { ids: number[]; areas: Luks2Area[] } {
  const slotIds = ids(keyslots, 'keyslot-count', 'keyslots');
  if (slotIds.length > policy.maxKeyslots) {
    fail('keyslot-count', `${slotIds.length} keyslots, at most ${policy.maxKeyslots} expected`);
  }
  if (!slotIds.includes(0)) fail('keyslot-0', 'keyslot 0 is missing');
  return {
    ids: slotIds,
    areas: slotIds.map((id) => checkKeyslot(id, keyslots, policy, layout, deviceSizeBytes)),
  };
}

/** The data segment's area: inside the device, not empty, sector-aligned. */
function checkSegmentArea(segment: Segment, deviceSizeBytes: number): Luks2Area {
  const { seg } = segment;
  const segOffset = u64(seg, 'offset', 'segment-area', 'segment 0');
  let segSize: number;
  if (seg.size === 'dynamic') {
    if (segOffset >= deviceSizeBytes) {
      fail('segment-area', `segment 0 starts at ${segOffset}, beyond the device (${deviceSizeBytes} bytes)`);
    }
    segSize = deviceSizeBytes - segOffset;
  } else {
    segSize = u64(seg, 'size', 'segment-area', 'segment 0');
    if (segSize === 0) fail('segment-area', 'segment 0 is empty');
    if (segOffset + segSize > deviceSizeBytes) {
      fail(
        'segment-area',
        `segment 0 [${segOffset}, ${segOffset + segSize}) is beyond the device (${deviceSizeBytes} bytes)`,
      );
    }
  }
  if (segOffset % segment.sectorSize !== 0)
    fail('segment-area', `segment 0 offset ${segOffset} is not sector-aligned`);
  return { name: 'segment 0', offset: segOffset, size: segSize };
}

/** `area-overlap`: no two areas share a byte. */
function checkNoOverlap(areas: Luks2Area[]): void {
  for (let i = 0; i < areas.length; i++) {
    for (let j = i + 1; j < areas.length; j++) {
      const a = areas[i] as Luks2Area;
      const b = areas[j] as Luks2Area;
      if (overlaps(a, b)) {
        fail(
          'area-overlap',
          `${a.name} [${a.offset}, ${a.offset + a.size}) overlaps ${b.name} [${b.offset}, ${b.offset + b.size})`,
        );
      }
    }
  }
}

/** Digests: bounded PBKDF2 over the volume key, referring only to keyslots and segments that exist. */
function checkDigests(digests: Json, policy: Luks2HeaderPolicy, slotIds: number[], segIds: number[]): void {
  const digestIds = ids(digests, 'digest', 'digests');
  if (digestIds.length === 0 || digestIds.length > policy.maxKeyslots) {
    fail('digest', `${digestIds.length} digests, expected 1..${policy.maxKeyslots}`);
  }
  let segmentCovered = false;
  for (const id of digestIds) {
    const where = `digest ${id}`;
    const d = field(digests, String(id), 'digest', 'digests');
    if (d.type !== 'pbkdf2') fail('digest', `${where} has type ${show(d.type)}, expected "pbkdf2"`);
    checkPbkdf2(d, policy, 'digest', where);
    str(d, 'digest', 'digest', where);
    for (const list of ['keyslots', 'segments'] as const) {
      const refs = d[list];
      if (!Array.isArray(refs)) fail('digest', `${where}.${list} is not an array`);
      for (const ref of refs) {
        const known = list === 'keyslots' ? slotIds : segIds;
        if (typeof ref !== 'string' || !/^\d{1,2}$/.test(ref) || !known.includes(Number(ref))) {
          fail('digest', `${where} refers to unknown ${list.slice(0, -1)} ${show(ref)}`);
        }
        if (list === 'segments') segmentCovered = true;
      }
    }
  }
  if (!segmentCovered) fail('digest', 'no digest covers segment 0');
}

/** Tokens: at most `maxTokens`, of allowed types, confboot's own with its initialization flag. */
function checkTokens(tokens: Json, policy: Luks2HeaderPolicy): Map<number, Record<string, unknown>> {
  const tokenIds = ids(tokens, 'token-count', 'tokens');
  if (tokenIds.length > policy.maxTokens)
    fail('token-count', `${tokenIds.length} tokens, at most ${policy.maxTokens} expected`);
  const tokenMap = new Map<number, Record<string, unknown>>();
  for (const id of tokenIds) {
    const where = `token ${id}`;
    const t = field(tokens, String(id), 'token-type', 'tokens');
    const type = str(t, 'type', 'token-type', where);
    if (!policy.tokenTypes.includes(type))
      fail('token-type', `${where} has type ${show(type)}, allowed: ${policy.tokenTypes.join(', ')}`);
    if (!Array.isArray(t.keyslots)) fail('token-type', `${where}.keyslots is not an array`);
    if (type === STATE_DISK_TOKEN_TYPE && typeof t.diskIsInitialized !== 'boolean') {
      fail('token-type', `${where}.diskIsInitialized is not a boolean`);
    }
    tokenMap.set(id, t);
  }
  return tokenMap;
}

/**
 * Validates LUKS2 JSON metadata against `policy` for a device of `deviceSizeBytes` bytes: the named
 * checks in order (config, data segment, keyslots, segment area, overlaps, digests, tokens).
 * Throws {@link Luks2HeaderError} (and nothing else) naming the first failed check.
 */
export function validateLuks2Metadata(
  metadata: unknown,
  deviceSizeBytes: number,
  policy: Luks2HeaderPolicy = DEFAULT_LUKS2_HEADER_POLICY,
): Luks2HeaderSummary {
  if (!Number.isSafeInteger(deviceSizeBytes) || deviceSizeBytes <= 0) {
    fail('header-read', `device size ${deviceSizeBytes} is not a positive integer`);
  }
  if (!isObject(metadata)) fail('json-structure', 'metadata is not a JSON object');
  const keyslots = field(metadata, 'keyslots', 'json-structure', 'metadata');
  const tokens = field(metadata, 'tokens', 'json-structure', 'metadata');
  const segments = field(metadata, 'segments', 'json-structure', 'metadata');
  const digests = field(metadata, 'digests', 'json-structure', 'metadata');
  const config = field(metadata, 'config', 'json-structure', 'metadata');

  const layout = checkConfig(config, deviceSizeBytes);
  const segment = checkSegment(segments, policy);
  const slots = checkKeyslots(keyslots, policy, layout, deviceSizeBytes);
  const areas: Luks2Area[] = [
    { name: 'header', offset: 0, size: layout.headersEnd },
    ...slots.areas,
    checkSegmentArea(segment, deviceSizeBytes),
  ];
  checkNoOverlap(areas);
  checkDigests(digests, policy, slots.ids, segment.ids);
  return { keyslots: slots.ids, tokens: checkTokens(tokens, policy), areas, integrity: segment.integrity };
}
