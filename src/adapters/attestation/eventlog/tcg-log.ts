/**
 * TCG PC Client firmware event logs (the kernel's `binary_bios_measurements`): parsing of the
 * crypto-agile format (first event "Spec ID Event03") and the legacy SHA-1 format, and replay to PCR
 * values per bank. The TDX CC event log (CCEL) has the same format, with MR index 1–4 for RTMR0–3.
 * The vTPM validator replays a document's event log and checks it against the quoted PCRs;
 * gcp-sev-es derives the GCE platform state from it; `measurements.ts` builds expected-measurement
 * configs and diffs from the same replay.
 * Hand-written, bounds-checked, little-endian as the TCG PC Client Platform Firmware Profile defines.
 */
import { createHash } from 'node:crypto';
import { AttestationError } from '../../../ports/errors.js';

/** Event types this module interprets (TCG PC Client PFP, table 9). */
export const EventType = {
  EV_PREBOOT_CERT: 0x0,
  EV_POST_CODE: 0x1,
  EV_NO_ACTION: 0x3,
  EV_SEPARATOR: 0x4,
  EV_ACTION: 0x5,
  EV_S_CRTM_VERSION: 0x8,
  EV_NONHOST_INFO: 0x11,
  EV_EFI_ACTION: 0x80000007,
} as const;

/** TPM_ALG_ID → node hash name and digest size for the banks a log may carry. */
const BANKS: Record<number, { name: string; size: number }> = {
  4: { name: 'sha1', size: 20 },
  11: { name: 'sha256', size: 32 },
  12: { name: 'sha384', size: 48 },
  13: { name: 'sha512', size: 64 },
};

/** Node hash name of a TPM_ALG_ID bank, or undefined if not supported for replay. */
export function bankHashName(alg: number): string | undefined {
  return BANKS[alg]?.name;
}

/** One measured event. */
export interface TcgEvent {
  /** Position in the log, 0-based, counting the header event. */
  seq: number;
  pcr: number;
  type: number;
  /** Digest per bank (TPM_ALG_ID). */
  digests: Map<number, Uint8Array>;
  data: Uint8Array;
}

/** A parsed event log. */
export interface TcgEventLog {
  format: 'crypto-agile' | 'sha1';
  /** Banks (TPM_ALG_ID) the log carries digests for. */
  banks: number[];
  /** Locality from a StartupLocality EV_NO_ACTION event, if present (PCR0 then starts at 00…0<locality>). */
  startupLocality?: number;
  /** Every event after the header, EV_NO_ACTION included (replay skips them). */
  events: TcgEvent[];
}

const SPEC_ID_SIGNATURE = Buffer.from('Spec ID Event03\0', 'latin1');
const STARTUP_LOCALITY_SIGNATURE = Buffer.from('StartupLocality\0', 'latin1');
/** Upper bound for one event's data; real events are a few kB (certificate lists, GPT). */
const MAX_EVENT_DATA = 1 << 24;
const MAX_PCR = 31;

class LogReader {
  private offset = 0;
  private readonly view: DataView;
  constructor(private readonly buf: Uint8Array) {
    this.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  get remaining(): number {
    return this.buf.length - this.offset;
  }
  get position(): number {
    return this.offset;
  }
  fail(message: string): AttestationError {
    return new AttestationError(
      'event-log-format',
      `parsing TCG event log at offset ${this.offset}: ${message}`,
    );
  }
  private need(n: number, field: string): void {
    if (n > this.remaining) throw this.fail(`truncated at ${field}: need ${n} bytes, have ${this.remaining}`);
  }
  u8(field: string): number {
    this.need(1, field);
    return this.view.getUint8(this.offset++);
  }
  u16(field: string): number {
    this.need(2, field);
    const v = this.view.getUint16(this.offset, true);
    this.offset += 2;
    return v;
  }
  u32(field: string): number {
    this.need(4, field);
    const v = this.view.getUint32(this.offset, true);
    this.offset += 4;
    return v;
  }
  bytes(n: number, field: string): Uint8Array {
    this.need(n, field);
    const v = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return v;
  }
  /** Index of the last byte that is not zero / not 0xff (-1 if none), found once: rescanning per event was quadratic. */
  private lastNonZero: number | undefined;
  private lastNonFf: number | undefined;
  private lastNot(pad: number): number {
    let i = this.buf.length - 1;
    while (i >= 0 && this.buf[i] === pad) i--;
    return i;
  }
  /**
   * True when only padding remains: firmware pads a TPM log area with zeros; the ACPI CCEL log area
   * of a TDX guest is 0xff-filled. Neither can start an event (PCR index 0xffffffff is out of range).
   */
  onlyPaddingLeft(): boolean {
    this.lastNonZero ??= this.lastNot(0);
    this.lastNonFf ??= this.lastNot(0xff);
    return this.offset > this.lastNonZero || this.offset > this.lastNonFf;
  }
}

function startsWith(data: Uint8Array, prefix: Uint8Array): boolean {
  return data.length >= prefix.length && Buffer.from(data.subarray(0, prefix.length)).equals(prefix);
}

function checkPcr(r: LogReader, pcr: number): void {
  if (pcr > MAX_PCR) throw r.fail(`PCR index ${pcr} out of range`);
}

/**
 * Parses a raw TCG event log, crypto-agile or legacy SHA-1.
 * @throws AttestationError (`event-log-format`) on malformed input
 */
export function parseEventLog(raw: Uint8Array): TcgEventLog {
  const r = new LogReader(raw);
  if (raw.length === 0) throw r.fail('empty log');
  // The first event is always in the legacy SHA-1 format (TCG_PCClientPCREvent). A TPM log puts the
  // Spec ID header at PCR 0; a confidential-computing log (TDX CCEL) puts it at MR index 1 (RTMR0).
  const first = readLegacyEvent(r, 0);
  const isAgile =
    first.type === EventType.EV_NO_ACTION &&
    (first.pcr === 0 || first.pcr === 1) &&
    startsWith(first.data, SPEC_ID_SIGNATURE);
  if (!isAgile) {
    const events = [first];
    const log: TcgEventLog = { format: 'sha1', banks: [0x0004], events };
    while (r.remaining > 0 && !r.onlyPaddingLeft()) events.push(readLegacyEvent(r, events.length));
    noteStartupLocality(log);
    return log;
  }
  const sizes = parseSpecIdEvent(first.data, r);
  const events: TcgEvent[] = [];
  let seq = 1;
  while (r.remaining > 0 && !r.onlyPaddingLeft()) events.push(readAgileEvent(r, seq++, sizes));
  const log: TcgEventLog = { format: 'crypto-agile', banks: [...sizes.keys()], events };
  noteStartupLocality(log);
  return log;
}

function readLegacyEvent(r: LogReader, seq: number): TcgEvent {
  const pcr = r.u32('pcrIndex');
  checkPcr(r, pcr);
  const type = r.u32('eventType');
  const digest = r.bytes(20, 'digest');
  const size = r.u32('eventSize');
  if (size > MAX_EVENT_DATA) throw r.fail(`event size ${size} too large`);
  const data = r.bytes(size, 'event');
  return { seq, pcr, type, digests: new Map([[0x0004, digest]]), data };
}

function parseSpecIdEvent(data: Uint8Array, outer: LogReader): Map<number, number> {
  const r = new LogReader(data);
  r.bytes(16, 'specId.signature');
  r.u32('specId.platformClass');
  r.u8('specId.specVersionMinor');
  r.u8('specId.specVersionMajor');
  r.u8('specId.specErrata');
  r.u8('specId.uintnSize');
  const n = r.u32('specId.numberOfAlgorithms');
  if (n === 0 || n > 16) throw outer.fail(`Spec ID event lists ${n} algorithms`);
  const sizes = new Map<number, number>();
  for (let i = 0; i < n; i++) {
    const alg = r.u16('specId.algorithmId');
    const size = r.u16('specId.digestSize');
    if (size === 0 || size > 128)
      throw outer.fail(`Spec ID digest size ${size} for algorithm 0x${alg.toString(16)}`);
    const known = BANKS[alg];
    if (known && known.size !== size)
      throw outer.fail(`Spec ID gives ${size} bytes for ${known.name}, want ${known.size}`);
    sizes.set(alg, size);
  }
  const vendorSize = r.u8('specId.vendorInfoSize');
  r.bytes(vendorSize, 'specId.vendorInfo');
  return sizes;
}

function readAgileEvent(r: LogReader, seq: number, sizes: Map<number, number>): TcgEvent {
  const pcr = r.u32('pcrIndex');
  checkPcr(r, pcr);
  const type = r.u32('eventType');
  const count = r.u32('digests.count');
  if (count > sizes.size)
    throw r.fail(`event ${seq} has ${count} digests, the log declares ${sizes.size} banks`);
  const digests = new Map<number, Uint8Array>();
  for (let i = 0; i < count; i++) {
    const alg = r.u16('digest.hashAlg');
    const size = sizes.get(alg);
    if (size === undefined)
      throw r.fail(`event ${seq} has a digest for undeclared algorithm 0x${alg.toString(16)}`);
    if (digests.has(alg)) throw r.fail(`event ${seq} has two digests for algorithm 0x${alg.toString(16)}`);
    digests.set(alg, r.bytes(size, 'digest'));
  }
  const size = r.u32('eventSize');
  if (size > MAX_EVENT_DATA) throw r.fail(`event size ${size} too large`);
  const data = r.bytes(size, 'event');
  return { seq, pcr, type, digests, data };
}

function noteStartupLocality(log: TcgEventLog): void {
  for (const e of log.events) {
    if (e.type === EventType.EV_NO_ACTION && e.pcr === 0 && startsWith(e.data, STARTUP_LOCALITY_SIGNATURE)) {
      if (e.data.length !== STARTUP_LOCALITY_SIGNATURE.length + 1)
        throw new AttestationError(
          'event-log-format',
          `StartupLocality event ${e.seq} has ${e.data.length} bytes`,
        );
      log.startupLocality = e.data[STARTUP_LOCALITY_SIGNATURE.length];
      return;
    }
  }
}

/**
 * Replays a parsed log: PCR_new = H(PCR_old ‖ digest) for every event except EV_NO_ACTION, starting
 * from zero (PCR0 from 00…0<locality> when a StartupLocality event is present). Returns, per bank the
 * log carries and node can hash, the PCRs that have at least one measured event.
 */
export function replayEventLog(log: TcgEventLog): Map<number, Map<number, Uint8Array>> {
  const out = new Map<number, Map<number, Uint8Array>>();
  for (const alg of log.banks) {
    const bank = BANKS[alg];
    if (!bank) continue;
    const pcrs = new Map<number, Uint8Array>();
    for (const e of log.events) {
      if (e.type === EventType.EV_NO_ACTION) continue;
      const digest = e.digests.get(alg);
      if (!digest) {
        throw new AttestationError(
          'event-log-format',
          `replaying TCG event log: event ${e.seq} (PCR${e.pcr}) has no ${bank.name} digest`,
        );
      }
      let cur = pcrs.get(e.pcr);
      if (!cur) {
        cur = new Uint8Array(bank.size);
        if (e.pcr === 0 && log.startupLocality !== undefined) cur[bank.size - 1] = log.startupLocality;
      }
      pcrs.set(e.pcr, createHash(bank.name).update(cur).update(digest).digest());
    }
    out.set(alg, pcrs);
  }
  return out;
}

/** A PCR whose replayed value differs from the quoted one. */
export interface ReplayMismatch {
  pcr: number;
  replayed: Uint8Array;
  quoted: Uint8Array | undefined;
}

/**
 * Replays `log` in bank `alg` and compares every PCR the log measures with `quoted`. PCRs without
 * events are not judged by the log. Returns the mismatches (empty when the log matches).
 * @throws AttestationError (`event-log`) when the log carries no digests for `alg`
 */
export function checkEventLogAgainstPcrs(
  log: TcgEventLog,
  alg: number,
  quoted: Map<number, Uint8Array>,
): ReplayMismatch[] {
  const replayed = replayEventLog(log).get(alg);
  if (!replayed) {
    throw new AttestationError(
      'event-log',
      `event log (${log.format}) has no ${bankHashName(alg) ?? `0x${alg.toString(16)}`} bank`,
    );
  }
  const mismatches: ReplayMismatch[] = [];
  for (const [pcr, value] of [...replayed].sort((a, b) => a[0] - b[0])) {
    const q = quoted.get(pcr);
    if (!q || !Buffer.from(q).equals(value)) mismatches.push({ pcr, replayed: value, quoted: q });
  }
  return mismatches;
}

/** GCE confidential technology from the EV_NONHOST_INFO event (go-tpm-tools enum values). */
export type GceConfidentialTechnology = 'NONE' | 'AMD_SEV' | 'AMD_SEV_ES' | 'INTEL_TDX' | 'AMD_SEV_SNP';
const TECHNOLOGIES: GceConfidentialTechnology[] = [
  'NONE',
  'AMD_SEV',
  'AMD_SEV_ES',
  'INTEL_TDX',
  'AMD_SEV_SNP',
];

/** Platform facts read from PCR0 events before the separator. */
export interface PlatformState {
  /** GCE virtual firmware version from EV_S_CRTM_VERSION, if it has the GCE form. */
  gceVersion?: number;
  /** Raw SCRTM version string when it is not a GCE version. */
  scrtmVersion?: Uint8Array;
  technology: GceConfidentialTechnology;
}

/** UCS-2 "GCE Virtual Firmware v". */
const GCE_FIRMWARE_PREFIX = Buffer.from('GCE Virtual Firmware v', 'utf16le');
const GCE_NONHOST_SIGNATURE = Buffer.from('GCE NonHostInfo\0', 'latin1');

/** Parses the GCE firmware version from an SCRTM version string (UCS-2, NUL-terminated). */
export function gceFirmwareVersion(version: Uint8Array): number | undefined {
  if (version.length <= GCE_FIRMWARE_PREFIX.length || version.length % 2 !== 0) return undefined;
  if (!startsWith(version, GCE_FIRMWARE_PREFIX)) return undefined;
  let digits = '';
  const rest = version.subarray(GCE_FIRMWARE_PREFIX.length);
  for (let i = 0; i < rest.length; i++) {
    const b = rest[i] as number;
    if (b === 0) continue;
    if (i % 2 !== 0) return undefined;
    digits += String.fromCharCode(b);
  }
  if (!/^[0-9]{1,9}$/.test(digits)) return undefined;
  return Number(digits);
}

/**
 * Derives the platform state from the PCR0 events of bank `alg` that come before the PCR0
 * separator. An SCRTM version or non-host info event whose digest is not the hash of its data is
 * an error (the event type is not covered by the digest, so it must not be trusted blindly).
 * @throws AttestationError (`event-log`) on a forged-looking PCR0 event
 */
export function platformState(log: TcgEventLog, alg: number): PlatformState {
  const name = bankHashName(alg);
  if (!name) throw new AttestationError('event-log', `unsupported bank 0x${alg.toString(16)}`);
  const h = (d: Uint8Array) => createHash(name).update(d).digest();
  const sepDigests = [h(Buffer.from([0, 0, 0, 0])), h(Buffer.from([0xff, 0xff, 0xff, 0xff]))];
  let version: Uint8Array | undefined;
  let nonHost: Uint8Array | undefined;
  for (const e of log.events) {
    if (e.pcr !== 0 || e.type === EventType.EV_NO_ACTION) continue;
    const digest = e.digests.get(alg);
    if (!digest) continue;
    const verified = h(e.data).equals(digest);
    const looksLikeSeparator = sepDigests.some((s) => s.equals(digest));
    if (e.type === EventType.EV_SEPARATOR || looksLikeSeparator) {
      if (e.type !== EventType.EV_SEPARATOR)
        throw new AttestationError(
          'event-log',
          `PCR0 event ${e.seq} has separator data but type 0x${e.type.toString(16)}`,
        );
      if (!verified)
        throw new AttestationError('event-log', `unverified separator digest in PCR0 event ${e.seq}`);
      break;
    }
    if (e.type === EventType.EV_S_CRTM_VERSION) {
      if (!verified) throw new AttestationError('event-log', 'invalid SCRTM version event for PCR0');
      version = e.data;
    }
    if (e.type === EventType.EV_NONHOST_INFO) {
      if (!verified) throw new AttestationError('event-log', 'invalid Non-Host info event for PCR0');
      nonHost = e.data;
    }
  }
  const state: PlatformState = { technology: 'NONE' };
  const gce = version ? gceFirmwareVersion(version) : undefined;
  if (gce !== undefined) state.gceVersion = gce;
  else if (version) state.scrtmVersion = version;
  if (
    nonHost &&
    nonHost.length > GCE_NONHOST_SIGNATURE.length &&
    startsWith(nonHost, GCE_NONHOST_SIGNATURE)
  ) {
    const tech = TECHNOLOGIES[nonHost[GCE_NONHOST_SIGNATURE.length] as number];
    if (tech) state.technology = tech;
  }
  return state;
}
