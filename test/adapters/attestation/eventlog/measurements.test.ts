/**
 * Measurements from a TCG event log, on the REAL GCE attestation of go-tpm-tools
 * (../shared/testvectors): its event log replays, in each of the three banks, to PCR 0-9 exactly as
 * the TPM quoted them; the replay becomes an attestation config block (unmeasured PCRs at their reset
 * values, 17-22 all ones), and a diff against expected values says which PCRs match; a bank the log
 * lacks and a measurement of the wrong size are refused.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  diffMeasurementsAgainstLog,
  eventTypeName,
  measurementsFromReplay,
  pcrResetValue,
  type ReplayBank,
  replayTcgEventLog,
} from '../../../../src/adapters/attestation/eventlog/measurements.js';
import { decodeAttestationPb } from '../../../../src/adapters/attestation/shared/vtpm-document.js';
import { isAttestationError } from '../../../../src/ports/errors.js';
import { VECTORS } from '../snp/vectors.js';

const GCE = decodeAttestationPb(
  new Uint8Array(readFileSync(resolve(VECTORS, 'go-tpm-tools/attestations/gce-cos-85-nonce9009.pb'))),
);
const hex = (b: Uint8Array | undefined) => Buffer.from(b ?? []).toString('hex');
const quotedPcrs = (i: number) => GCE.quotes[i]?.pcrs ?? new Map<number, Uint8Array>();

describe('replayTcgEventLog', () => {
  it.each([
    ['sha1', 0],
    ['sha256', 1],
    ['sha384', 2],
  ] as const)('replays the %s bank to the PCRs 0-9 the TPM quoted', (bank, quote) => {
    const replay = replayTcgEventLog(GCE.eventLog, bank as ReplayBank);
    expect(replay.format).toBe('crypto-agile');
    for (let pcr = 0; pcr <= 9; pcr++)
      expect(hex(replay.pcrs.get(pcr)), `PCR ${pcr}`).toBe(hex(quotedPcrs(quote).get(pcr)));
    expect(replay.events.get(0)?.length).toBeGreaterThan(0);
  });

  it('refuses a bank the log does not have', () => {
    let err: unknown;
    try {
      replayTcgEventLog(GCE.eventLog, 'sha512' as ReplayBank);
    } catch (e) {
      err = e;
    }
    expect(isAttestationError(err) ? err.check : err).toBe('event-log');
  });
});

describe('measurements from a replay', () => {
  const replay = replayTcgEventLog(GCE.eventLog, 'sha256');

  it('writes a config block, reset values for unmeasured PCRs', () => {
    const { measurements, unmeasured } = measurementsFromReplay(replay, [4, 4, 17, 0]);
    expect(Object.keys(measurements)).toEqual(['0', '4', '17']);
    expect(measurements['4']).toEqual({ expected: hex(quotedPcrs(1).get(4)), warnOnly: false });
    expect(unmeasured).toEqual([17]);
    expect(measurements['17']?.expected).toBe('ff'.repeat(32));
    expect([hex(pcrResetValue(16, 2)), hex(pcrResetValue(22, 2)), hex(pcrResetValue(23, 2))]).toEqual([
      '0000',
      'ffff',
      '0000',
    ]);
  });

  it('diffs expected values against the log', () => {
    const pcr4 = quotedPcrs(1).get(4) as Uint8Array;
    const rows = diffMeasurementsAgainstLog(
      new Map([
        [4, { expected: pcr4, warnOnly: false }],
        [8, { expected: new Uint8Array(32).fill(1), warnOnly: true }],
      ]),
      replay,
    );
    expect(rows.map((r) => [r.pcr, r.match, r.measured, r.warnOnly])).toEqual([
      [4, true, true, false],
      [8, false, true, true],
    ]);
    expect(() =>
      diffMeasurementsAgainstLog(new Map([[4, { expected: new Uint8Array(20), warnOnly: false }]]), replay),
    ).toThrow('measurement 4 has 20 bytes, the sha256 bank has 32');
  });

  it('names event types, unknown ones in hex', () => {
    expect(eventTypeName(0x80000001)).toBe('EV_EFI_VARIABLE_DRIVER_CONFIG');
    expect(eventTypeName(0x7fffffff)).toBe('0x7fffffff');
  });
});
