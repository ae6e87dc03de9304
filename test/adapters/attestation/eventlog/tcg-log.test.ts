/** TCG event-log parsing and replay against the 14 real logs of go-tpm-tools (testvectors §1.4). */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkEventLogAgainstPcrs,
  EventType,
  gceFirmwareVersion,
  parseEventLog,
  platformState,
  replayEventLog,
} from '../../../../src/adapters/attestation/eventlog/tcg-log.js';
import { isAttestationError } from '../../../../src/ports/errors.js';

const vectors = resolve(import.meta.dirname, '../../../../../shared/testvectors/go-tpm-tools');
const expected = JSON.parse(readFileSync(resolve(vectors, 'eventlogs/expected.json'), 'utf8')) as {
  logs: Record<string, { file: string; expected_pcrs: Record<string, Record<string, string>> }>;
};
const BANK_IDS: Record<string, number> = { SHA1: 0x0004, SHA256: 0x000b, SHA384: 0x000c };

describe('TCG event log replay', () => {
  const cases = Object.entries(expected.logs);
  it('parses zero padding in linear time: 4 MiB of zeros ending in one byte does not hang (fuzz finding)', () => {
    const padded = new Uint8Array(4 * 1024 * 1024);
    padded[padded.length - 1] = 1;
    let outcome: unknown;
    try {
      outcome = parseEventLog(padded);
    } catch (err) {
      outcome = err;
    }
    // Zero "events" (PCR 0, type 0, empty data) are read until the trailing byte breaks one.
    expect(isAttestationError(outcome), String(outcome)).toBe(true);
  });

  it('covers all 14 logs', () => {
    expect(cases).toHaveLength(14);
  });

  it.each(cases)('%s replays to the expected PCRs of every bank', (_name, c) => {
    const log = parseEventLog(readFileSync(resolve(vectors, c.file)));
    const replayed = replayEventLog(log);
    let compared = 0;
    for (const [bank, pcrs] of Object.entries(c.expected_pcrs)) {
      const alg = BANK_IDS[bank] as number;
      const got = replayed.get(alg);
      expect(got, `bank ${bank}`).toBeDefined();
      for (const [idx, hex] of Object.entries(pcrs)) {
        expect(Buffer.from(got?.get(Number(idx)) ?? []).toString('hex'), `${bank} PCR${idx}`).toBe(
          hex.toLowerCase(),
        );
        compared++;
      }
    }
    expect(compared).toBeGreaterThan(0);
  });

  it('reads the legacy SHA-1 format (debian-10)', () => {
    const log = parseEventLog(readFileSync(resolve(vectors, 'eventlogs/debian-10.bin')));
    expect(log.format).toBe('sha1');
    expect(log.banks).toEqual([0x0004]);
  });

  it('honours StartupLocality 3 (gdc-host, glinux-alex) and not elsewhere', () => {
    expect(parseEventLog(readFileSync(resolve(vectors, 'eventlogs/gdc-host.bin'))).startupLocality).toBe(3);
    expect(parseEventLog(readFileSync(resolve(vectors, 'eventlogs/glinux-alex.bin'))).startupLocality).toBe(
      3,
    );
    expect(
      parseEventLog(readFileSync(resolve(vectors, 'eventlogs/cos-85-amd-sev.bin'))).startupLocality,
    ).toBeUndefined();
  });

  it('derives GCE firmware version and AMD SEV from the COS 85 log', () => {
    const log = parseEventLog(readFileSync(resolve(vectors, 'eventlogs/cos-85-amd-sev.bin')));
    const st = platformState(log, 0x000b);
    expect(st.technology).toBe('AMD_SEV');
    expect(st.gceVersion).toBeGreaterThanOrEqual(0);
  });

  it('rejects an SCRTM version event whose data does not match its digest (gdc-host)', () => {
    const log = parseEventLog(readFileSync(resolve(vectors, 'eventlogs/gdc-host.bin')));
    expect(() => platformState(log, 0x000b)).toThrow(/invalid SCRTM version event for PCR0/);
  });

  it('parses GCE firmware versions only in their UCS-2 form', () => {
    expect(gceFirmwareVersion(Buffer.from('GCE Virtual Firmware v12\0', 'utf16le'))).toBe(12);
    expect(gceFirmwareVersion(Buffer.from('GCE Virtual Firmware v', 'utf16le'))).toBeUndefined();
    expect(gceFirmwareVersion(Buffer.from('OVMF v1\0', 'utf16le'))).toBeUndefined();
  });

  it('reports PCRs whose replay differs from the quoted value', () => {
    const log = parseEventLog(readFileSync(resolve(vectors, 'eventlogs/cos-85-amd-sev.bin')));
    const pcrs = new Map(replayEventLog(log).get(0x000b));
    expect(checkEventLogAgainstPcrs(log, 0x000b, pcrs)).toEqual([]);
    pcrs.set(4, Buffer.alloc(32, 1));
    const mism = checkEventLogAgainstPcrs(log, 0x000b, pcrs);
    expect(mism.map((m) => m.pcr)).toEqual([4]);
    expect(() => checkEventLogAgainstPcrs(log, 0x000d, pcrs)).toThrow(/no sha512 bank/);
  });

  it('turns every truncation of a real log into an event-log-format error or a shorter log, never a crash', () => {
    const raw = readFileSync(resolve(vectors, 'eventlogs/ubuntu-2404-amd-sevsnp.bin'));
    const full = parseEventLog(raw);
    expect(full.events.some((e) => e.type === EventType.EV_SEPARATOR)).toBe(true);
    let rejected = 0;
    for (let cut = 1; cut < raw.length; cut += 97) {
      try {
        expect(parseEventLog(raw.subarray(0, cut)).events.length).toBeLessThan(full.events.length);
      } catch (err) {
        expect(isAttestationError(err) && err.check === 'event-log-format', String(err)).toBe(true);
        rejected++;
      }
    }
    expect(rejected).toBeGreaterThan(100);
    expect(() => parseEventLog(new Uint8Array())).toThrow(/empty log/);
  });

  it('random mutations of a real log parse and replay, or fail with event-log-format, never crash', () => {
    const raw = readFileSync(resolve(vectors, 'eventlogs/cos-85-amd-sev.bin'));
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(raw.length - 1), fc.integer({ min: 1, max: 255 })), {
          minLength: 1,
          maxLength: 3,
        }),
        (edits) => {
          const copy = Buffer.from(raw);
          for (const [i, x] of edits) copy[i] = (copy[i] as number) ^ x;
          try {
            replayEventLog(parseEventLog(copy));
          } catch (err) {
            return isAttestationError(err) && err.check === 'event-log-format';
          }
          return true;
        },
      ),
      { numRuns: 300 },
    );
  });
});
