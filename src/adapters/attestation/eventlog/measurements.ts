/**
 * Expected measurements from a reference node's event log: replays a raw TCG event log (TPM
 * `binary_bios_measurements` or TDX CCEL) in one bank, keeps the events that changed each PCR, and
 * turns the result into an attestation-config `measurements` block or a per-PCR diff against one.
 * `confboot measurements` and image builders use this code, so both compute the same values.
 */
import { AttestationError } from '../../../ports/errors.js';
import type { Measurements } from '../../../ports/types.js';
import { EventType, parseEventLog, replayEventLog, type TcgEvent } from './tcg-log.js';

/** Banks by name, as TPM_ALG_ID and digest size. */
export const REPLAY_BANKS = {
  sha1: { alg: 0x0004, size: 20 },
  sha256: { alg: 0x000b, size: 32 },
  sha384: { alg: 0x000c, size: 48 },
  sha512: { alg: 0x000d, size: 64 },
} as const;
export type ReplayBank = keyof typeof REPLAY_BANKS;

/** Names of TCG PC Client PFP event types (hex as the specification lists them), for display. */
const EVENT_TYPE_NAMES = new Map<number, string>([
  [0x0, 'EV_PREBOOT_CERT'],
  [0x1, 'EV_POST_CODE'],
  [0x2, 'EV_UNUSED'],
  [0x3, 'EV_NO_ACTION'],
  [0x4, 'EV_SEPARATOR'],
  [0x5, 'EV_ACTION'],
  [0x6, 'EV_EVENT_TAG'],
  [0x7, 'EV_S_CRTM_CONTENTS'],
  [0x8, 'EV_S_CRTM_VERSION'],
  [0x9, 'EV_CPU_MICROCODE'],
  [0xa, 'EV_PLATFORM_CONFIG_FLAGS'],
  [0xb, 'EV_TABLE_OF_DEVICES'],
  [0xc, 'EV_COMPACT_HASH'],
  [0xd, 'EV_IPL'],
  [0xe, 'EV_IPL_PARTITION_DATA'],
  [0xf, 'EV_NONHOST_CODE'],
  [0x10, 'EV_NONHOST_CONFIG'],
  [0x11, 'EV_NONHOST_INFO'],
  [0x12, 'EV_OMIT_BOOT_DEVICE_EVENTS'],
  [0x80000001, 'EV_EFI_VARIABLE_DRIVER_CONFIG'],
  [0x80000002, 'EV_EFI_VARIABLE_BOOT'],
  [0x80000003, 'EV_EFI_BOOT_SERVICES_APPLICATION'],
  [0x80000004, 'EV_EFI_BOOT_SERVICES_DRIVER'],
  [0x80000005, 'EV_EFI_RUNTIME_SERVICES_DRIVER'],
  [0x80000006, 'EV_EFI_GPT_EVENT'],
  [0x80000007, 'EV_EFI_ACTION'],
  [0x80000008, 'EV_EFI_PLATFORM_FIRMWARE_BLOB'],
  [0x80000009, 'EV_EFI_HANDOFF_TABLES'],
  [0x8000000a, 'EV_EFI_PLATFORM_FIRMWARE_BLOB2'],
  [0x8000000b, 'EV_EFI_HANDOFF_TABLES2'],
  [0x8000000c, 'EV_EFI_VARIABLE_BOOT2'],
  [0x80000010, 'EV_EFI_HCRTM_EVENT'],
  [0x800000e0, 'EV_EFI_VARIABLE_AUTHORITY'],
  [0x800000e1, 'EV_EFI_SPDM_FIRMWARE_BLOB'],
  [0x800000e2, 'EV_EFI_SPDM_FIRMWARE_CONFIG'],
]);

/** Name of an event type, or its hex value. */
export function eventTypeName(type: number): string {
  return EVENT_TYPE_NAMES.get(type) ?? `0x${type.toString(16).padStart(8, '0')}`;
}

/** One event that extended a PCR in the replayed bank. */
export interface MeasuredEvent {
  /** Position in the log (0 is the header). */
  seq: number;
  pcr: number;
  type: number;
  typeName: string;
  /** Digest extended into the PCR, in the replayed bank. */
  digest: Uint8Array;
  /** Short human-readable summary of the event data (a string, variable or image path). */
  description: string;
}

/** A log replayed in one bank. */
export interface EventLogReplay {
  format: 'crypto-agile' | 'sha1';
  /** Banks the log carries, by name (unknown algorithms as hex). */
  banks: string[];
  bank: ReplayBank;
  /** Final value of every PCR with at least one measured event. */
  pcrs: Map<number, Uint8Array>;
  /** Events that extended each PCR, in log order. */
  events: Map<number, MeasuredEvent[]>;
}

function bankLabel(alg: number): string {
  const e = Object.entries(REPLAY_BANKS).find(([, b]) => b.alg === alg);
  return e ? e[0] : `0x${alg.toString(16).padStart(4, '0')}`;
}

/**
 * Parses and replays a raw event log in `bank` (default sha256).
 * @throws AttestationError (`event-log-format`) on a malformed log, (`event-log`) when the log has
 *   no digests for `bank`
 */
export function replayTcgEventLog(raw: Uint8Array, bank: ReplayBank = 'sha256'): EventLogReplay {
  const log = parseEventLog(raw);
  const { alg } = REPLAY_BANKS[bank];
  const banks = log.banks.map(bankLabel);
  if (!log.banks.includes(alg)) {
    throw new AttestationError(
      'event-log',
      `event log (${log.format}) has no ${bank} bank; it has ${banks.join(', ')}`,
    );
  }
  const pcrs = replayEventLog(log).get(alg) ?? new Map<number, Uint8Array>();
  const events = new Map<number, MeasuredEvent[]>();
  for (const e of log.events) {
    if (e.type === EventType.EV_NO_ACTION) continue;
    const digest = e.digests.get(alg);
    if (!digest) continue; // replayEventLog has already refused this
    const list = events.get(e.pcr) ?? [];
    events.set(e.pcr, list);
    list.push({
      seq: e.seq,
      pcr: e.pcr,
      type: e.type,
      typeName: eventTypeName(e.type),
      digest,
      description: describeEvent(e),
    });
  }
  return { format: log.format, banks, bank, pcrs: new Map([...pcrs].sort((a, b) => a[0] - b[0])), events };
}

/**
 * Value of a PCR that no event extended: PCRs 17–22 reset to all ones (locality-gated, for DRTM),
 * every other PCR to zeros.
 */
export function pcrResetValue(pcr: number, size: number): Uint8Array {
  return new Uint8Array(size).fill(pcr >= 17 && pcr <= 22 ? 0xff : 0);
}

/** An attestation-config `measurements` block: index → `{expected, warnOnly}`. */
export type MeasurementsBlock = Record<string, { expected: string; warnOnly: boolean }>;

/** Result of {@link measurementsFromReplay}. */
export interface MeasurementsFromLog {
  measurements: MeasurementsBlock;
  /** Requested PCRs the log never extends; their reset value was written. */
  unmeasured: number[];
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/**
 * Builds the `measurements` block for `pcrs` (default: every PCR the log extends). A requested PCR
 * without events gets its reset value and is listed in `unmeasured`: whatever extends it after the
 * firmware log (confboot's PCR 15 marker, IMA's PCR 10) is not predicted by the log.
 */
export function measurementsFromReplay(replay: EventLogReplay, pcrs?: number[]): MeasurementsFromLog {
  const size = REPLAY_BANKS[replay.bank].size;
  const indices = pcrs ? [...new Set(pcrs)].sort((a, b) => a - b) : [...replay.pcrs.keys()];
  const measurements: MeasurementsBlock = {};
  const unmeasured: number[] = [];
  for (const i of indices) {
    let value = replay.pcrs.get(i);
    if (!value) {
      unmeasured.push(i);
      value = pcrResetValue(i, size);
    }
    measurements[String(i)] = { expected: hex(value), warnOnly: false };
  }
  return { measurements, unmeasured };
}

/** One row of {@link diffMeasurementsAgainstLog}. */
export interface PcrDiff {
  pcr: number;
  expected: Uint8Array;
  /** Replayed value; the reset value when the log has no events for the PCR (`measured` false). */
  actual: Uint8Array;
  measured: boolean;
  warnOnly: boolean;
  match: boolean;
  /** Events that extended the PCR (empty when unmeasured). */
  events: MeasuredEvent[];
}

/**
 * Compares expected measurements with a replayed log, one row per expected index in ascending order.
 * @throws AttestationError (`event-log`) when the expected values do not have the bank's digest size
 */
export function diffMeasurementsAgainstLog(expected: Measurements, replay: EventLogReplay): PcrDiff[] {
  const size = REPLAY_BANKS[replay.bank].size;
  const rows: PcrDiff[] = [];
  for (const [pcr, m] of [...expected].sort((a, b) => a[0] - b[0])) {
    if (m.expected.length !== size) {
      throw new AttestationError(
        'event-log',
        `measurement ${pcr} has ${m.expected.length} bytes, the ${replay.bank} bank has ${size}`,
      );
    }
    const replayed = replay.pcrs.get(pcr);
    const actual = replayed ?? pcrResetValue(pcr, size);
    rows.push({
      pcr,
      expected: m.expected,
      actual,
      measured: replayed !== undefined,
      warnOnly: m.warnOnly,
      match: Buffer.from(actual).equals(m.expected),
      events: replay.events.get(pcr) ?? [],
    });
  }
  return rows;
}

// ---- event descriptions -------------------------------------------------------------------------

const MAX_DESCRIPTION = 120;

function clip(s: string): string {
  return s.length > MAX_DESCRIPTION ? `${s.slice(0, MAX_DESCRIPTION - 1)}…` : s;
}

function printable(s: string): boolean {
  return s.length > 0 && /^[\x20-\x7e\t\r\n]+$/.test(s);
}

/** The data as text when it is printable ASCII or UCS-2 (trailing NULs dropped), else undefined. */
function asText(data: Uint8Array): string | undefined {
  const ascii = Buffer.from(data).toString('latin1').replace(/\0+$/, '');
  if (printable(ascii)) return ascii;
  if (data.length % 2 === 0) {
    const ucs2 = Buffer.from(data).toString('utf16le').replace(/\0+$/, '');
    if (printable(ucs2)) return ucs2;
  }
  return undefined;
}

function u64(data: Uint8Array, off: number): number | undefined {
  if (off + 8 > data.length) return undefined;
  const v = Buffer.from(data.subarray(off, off + 8)).readBigUInt64LE();
  return v > BigInt(Number.MAX_SAFE_INTEGER) ? undefined : Number(v);
}

/** UEFI_VARIABLE_DATA: GUID, name length (chars), data length, UCS-2 name, data. */
function describeVariable(data: Uint8Array): string | undefined {
  const nameChars = u64(data, 16);
  const dataLen = u64(data, 24);
  if (nameChars === undefined || dataLen === undefined || 32 + 2 * nameChars > data.length) return undefined;
  const name = Buffer.from(data.subarray(32, 32 + 2 * nameChars)).toString('utf16le');
  if (!printable(name)) return undefined;
  let text = `variable ${name} (${dataLen} bytes)`;
  // Boot#### holds an EFI_LOAD_OPTION: attributes u32, path-list length u16, UCS-2 description.
  const value = data.subarray(32 + 2 * nameChars);
  if (/^Boot[0-9A-Fa-f]{4}$/.test(name) && value.length > 6) {
    const desc = Buffer.from(value.subarray(6)).toString('utf16le').split('\0')[0] ?? '';
    if (printable(desc)) text += ` "${desc}"`;
  }
  return text;
}

/** UEFI_IMAGE_LOAD_EVENT: the file path node of the device path, if any. */
function describeImage(data: Uint8Array): string | undefined {
  const inMemory = u64(data, 8);
  const pathLen = u64(data, 24);
  if (inMemory === undefined || pathLen === undefined || 32 + pathLen > data.length) return undefined;
  const path = data.subarray(32, 32 + pathLen);
  let file: string | undefined;
  for (let off = 0; off + 4 <= path.length; ) {
    const type = path[off] as number;
    const subtype = path[off + 1] as number;
    const len = (path[off + 2] as number) | ((path[off + 3] as number) << 8);
    if (len < 4 || off + len > path.length || type === 0x7f) break;
    if (type === 4 && subtype === 4) {
      const p = Buffer.from(path.subarray(off + 4, off + len))
        .toString('utf16le')
        .replace(/\0+$/, '');
      if (printable(p)) file = file ? `${file}${p.startsWith('\\') ? '' : '\\'}${p}` : p;
    }
    off += len;
  }
  return `image ${inMemory} bytes${file ? ` ${file}` : ''}`;
}

function describeEvent(e: TcgEvent): string {
  const d = e.data;
  let text: string | undefined;
  if (e.type === EventType.EV_SEPARATOR && d.length === 4) {
    const v = Buffer.from(d).readUInt32LE();
    text = v === 0 ? 'separator' : v === 0xffffffff ? 'separator (error)' : undefined;
  } else if (
    e.type === 0x80000001 ||
    e.type === 0x80000002 ||
    e.type === 0x8000000c ||
    e.type === 0x800000e0
  ) {
    text = describeVariable(d);
  } else if (e.type === 0x80000003 || e.type === 0x80000004 || e.type === 0x80000005) {
    text = describeImage(d);
  }
  if (text === undefined) {
    const t = asText(d);
    text =
      t !== undefined
        ? JSON.stringify(t)
        : d.length === 0
          ? 'no data'
          : `${d.length} bytes ${hex(d.subarray(0, 16))}${d.length > 16 ? '…' : ''}`;
  }
  return clip(text);
}
