/**
 * `confboot measurements from-event-log|diff` through run(), on every real event log in the test
 * vectors: the 14 go-tpm-tools logs (expected PCRs from upstream's Go literals), the logs inside the
 * two GCE attestations and the AWS attestation document (their quoted PCRs), and the TDX CCEL (the
 * RTMRs of its quote). Plus the diff, the library export and the exit codes.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { decodeAttestationPb } from '../../../src/adapters/attestation/shared/vtpm-document.js';
import { parseTdxQuote } from '../../../src/adapters/attestation/tdx/quote.js';
import { type DiffReport, run } from '../../../src/app/cli/measurements.js';
import * as lib from '../../../src/index.js';
import { useTmpDirs } from '../../support/tmp.js';

const vectors = resolve(import.meta.dirname, '../../../../shared/testvectors');
const v = (p: string) => resolve(vectors, p);
const expected = JSON.parse(readFileSync(v('go-tpm-tools/eventlogs/expected.json'), 'utf8')) as {
  logs: Record<string, { file: string; expected_pcrs: Record<string, Record<string, string>> }>;
};
const tmp = useTmpDirs('confboot-measurements-');

let out = '';
let err = '';
beforeEach(() => {
  out = '';
  err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((c: string | Uint8Array) => {
    out += String(c);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((c: string | Uint8Array) => {
    err += String(c);
    return true;
  });
});
afterEach(() => {
  vi.restoreAllMocks();
});

type Block = { measurements: Record<string, { expected: string; warnOnly: boolean }> };

/** Runs from-event-log and returns index → hex of the printed block. */
async function fromLog(args: string[]): Promise<Record<string, string>> {
  out = '';
  const code = await run(['from-event-log', ...args]);
  expect(code, err).toBe(0);
  const block = JSON.parse(out) as Block;
  for (const m of Object.values(block.measurements)) expect(m.warnOnly).toBe(false);
  return Object.fromEntries(Object.entries(block.measurements).map(([k, m]) => [k, m.expected]));
}

function file(name: string, content: string | Uint8Array): string {
  const p = join(tmp(), name);
  writeFileSync(p, content);
  return p;
}

const b64hex = (s: string) => Buffer.from(s, 'base64').toString('hex');

describe('confboot measurements from-event-log reproduces the expected PCRs of every real log', () => {
  const logs = Object.entries(expected.logs);
  it('covers the 14 go-tpm-tools logs', () => {
    expect(logs).toHaveLength(14);
  });

  const sha256Logs = logs.filter(([, c]) => c.expected_pcrs.SHA256);
  it.each(sha256Logs)('%s: SHA-256 PCRs', async (_name, c) => {
    const want = Object.fromEntries(
      Object.entries(c.expected_pcrs.SHA256 as Record<string, string>).map(([k, h]) => [k, h.toLowerCase()]),
    );
    // The default is every PCR the log extends; the upstream literals list exactly those.
    expect(await fromLog(['--event-log', v(`go-tpm-tools/${c.file}`)])).toEqual(want);
    expect(
      await fromLog(['--event-log', v(`go-tpm-tools/${c.file}`), '--pcrs', Object.keys(want).join(',')]),
    ).toEqual(want);
  });

  it.each(logs.filter(([, c]) => c.expected_pcrs.SHA1))('%s: SHA-1 PCRs through the library', (_name, c) => {
    const replay = lib.replayTcgEventLog(readFileSync(v(`go-tpm-tools/${c.file}`)), 'sha1');
    const got = Object.fromEntries(
      [...replay.pcrs].map(([i, b]) => [String(i), Buffer.from(b).toString('hex')]),
    );
    for (const [i, h] of Object.entries(c.expected_pcrs.SHA1 as Record<string, string>))
      expect(got[i], `PCR${i}`).toBe(h.toLowerCase());
  });

  it('refuses the SHA-1-only debian-10 log with exit 2 and says why', async () => {
    expect(await run(['from-event-log', '--event-log', v('go-tpm-tools/eventlogs/debian-10.bin')])).toBe(2);
    expect(err).toMatch(/has no sha256 bank; it has sha1 \(attestation configs hold SHA-256/);
    expect(out).toBe('');
  });

  it.each(['gce-cos-85-nonce9009.pb', 'gce-cos-85-no-nonce.pb'])(
    'the log inside %s gives the PCRs of its SHA-256 quote',
    async (name) => {
      const att = decodeAttestationPb(readFileSync(v(`go-tpm-tools/attestations/${name}`)));
      const quote = att.quotes.find((q) => q.pcrHashAlg === 0x000b);
      const got = await fromLog(['--event-log', file('log.bin', att.eventLog)]);
      expect(Object.keys(got)).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '8', '9']);
      for (const [i, h] of Object.entries(got))
        expect(h, `PCR${i}`).toBe(Buffer.from(quote?.pcrs.get(Number(i)) ?? []).toString('hex'));
    },
  );

  it('the log inside the AWS attestation document gives the PCRs of its SHA-256 and SHA-384 quotes', async () => {
    const doc = JSON.parse(readFileSync(v('constellation/aws-snp-attdoc-2023/attdoc-aws.txt'), 'utf8')) as {
      Attestation: {
        eventLog: string;
        quotes: Array<{ pcrs: { hash: string; pcrs: Record<string, string> } }>;
      };
    };
    const log = file('aws.bin', Buffer.from(doc.Attestation.eventLog, 'base64'));
    for (const [bank, name] of [
      ['sha256', 'SHA256'],
      ['sha384', 'SHA384'],
    ] as const) {
      const quoted = doc.Attestation.quotes.find((q) => q.pcrs.hash === name)?.pcrs.pcrs ?? {};
      const got = await fromLog(['--event-log', log, '--bank', bank]);
      expect(Object.keys(got)).toEqual(['0', '1', '2', '3', '4', '5', '6', '7', '9', '12', '14']);
      for (const [i, h] of Object.entries(got)) expect(h, `${bank} PCR${i}`).toBe(b64hex(quoted[i] ?? ''));
    }
  });

  it('the TDX CCEL (0xff-padded, header at MR index 1) gives RTMR0-2 of its quote as qemu-tdx indices 1-3', async () => {
    const quote = parseTdxQuote(readFileSync(v('go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat')));
    const hexes = quote.body.rtmrs.map((r) => Buffer.from(r).toString('hex'));
    const got = await fromLog([
      '--event-log',
      v('go-tdx-guest/testdata/ccel/ccel_data.dat'),
      '--bank',
      'sha384',
    ]);
    expect(got).toEqual({ '1': hexes[0], '2': hexes[1], '3': hexes[2] });
    // RTMR3 has no events and is zero in the quote, which is what the reset value says.
    expect(hexes[3]).toBe('00'.repeat(48));
    const withRtmr3 = await fromLog([
      '--event-log',
      v('go-tdx-guest/testdata/ccel/ccel_data.dat'),
      '--bank',
      'sha384',
      '--pcrs',
      '1,2,3,4',
    ]);
    expect(withRtmr3['4']).toBe(hexes[3]);
  });
});

describe('confboot measurements from-event-log options', () => {
  const cos85 = v('go-tpm-tools/eventlogs/cos-85-amd-sev.bin');

  it('writes the reset value for a PCR without events, with a warning on stderr', async () => {
    const got = await fromLog(['--event-log', cos85, '--pcrs', '15,4']);
    expect(Object.keys(got)).toEqual(['4', '15']);
    expect(got['15']).toBe('00'.repeat(32));
    expect(err).toMatch(/warning: PCR 15 has no events in the log/);
    expect(err).toMatch(/replayed \d+ events \(crypto-agile, sha256\); PCRs extended: 0,1,2,3,4,5,6,7,8,9/);
  });

  it('prints the same block as YAML with --yaml', async () => {
    const json = await fromLog(['--event-log', cos85, '--pcrs', '4,8,9']);
    out = '';
    expect(await run(['from-event-log', '--event-log', cos85, '--pcrs', '4,8,9', '--yaml'])).toBe(0);
    const y = parseYaml(out) as Block;
    expect(Object.fromEntries(Object.entries(y.measurements).map(([k, m]) => [k, m.expected]))).toEqual(json);
  });

  it('is the library function image builders import from the package index', () => {
    const replay = lib.replayTcgEventLog(readFileSync(cos85));
    const { measurements, unmeasured } = lib.measurementsFromReplay(replay, [4, 15]);
    expect(measurements['4']?.expected).toBe(
      expected.logs.COS85AmdSev?.expected_pcrs.SHA256?.['4']?.toLowerCase(),
    );
    expect(unmeasured).toEqual([15]);
    expect(replay.events.get(4)?.map((e) => e.typeName)).toContain('EV_EFI_BOOT_SERVICES_APPLICATION');
  });

  it.each([
    [['--pcrs', '4,x'], /--pcrs: "x" is not a PCR index 0-31/],
    [['--pcrs', '4,,8'], /--pcrs: .* is not a comma-separated list/],
    [['--pcrs', '32'], /--pcrs: "32" is not a PCR index/],
    [['--bank', 'sha1'], /--bank: "sha1" is not one of sha256, sha384/],
    [['--json', '--yaml'], /--json and --yaml exclude each other/],
    [['--bogus'], /Unknown option '--bogus'/],
  ])('exits 2 on %j', async (args, message) => {
    expect(await run(['from-event-log', '--event-log', cos85, ...args])).toBe(2);
    expect(err).toMatch(message);
    expect(out).toBe('');
  });

  it('exits 2 on a missing, unreadable or malformed log', async () => {
    expect(await run(['from-event-log'])).toBe(2);
    expect(err).toMatch(/missing required option --event-log/);
    err = '';
    expect(await run(['from-event-log', '--event-log', join(tmp(), 'nope')])).toBe(2);
    expect(err).toMatch(/reading event log .*nope: ENOENT/);
    err = '';
    const truncated = file('cut.bin', readFileSync(cos85).subarray(0, 1000));
    expect(await run(['from-event-log', '--event-log', truncated])).toBe(2);
    expect(err).toMatch(/cut\.bin: parsing TCG event log at offset \d+: truncated/);
    err = '';
    expect(await run(['from-event-log', '--event-log', file('empty.bin', '')])).toBe(2);
    expect(err).toMatch(/empty log/);
    err = '';
    // A device that never ends is cut off at the size bound instead of exhausting memory.
    expect(await run(['from-event-log', '--event-log', '/dev/zero'])).toBe(2);
    expect(err).toMatch(/event log \/dev\/zero is larger than 64 MiB/);
    err = '';
    expect(await run(['from-event-log', '--event-log', tmp()])).toBe(2);
    expect(err).toMatch(/reading event log .*: EISDIR/);
  });
});

describe('confboot measurements diff', () => {
  const cos85 = v('go-tpm-tools/eventlogs/cos-85-amd-sev.bin');
  const cos93 = v('go-tpm-tools/eventlogs/cos-93-amd-sev.bin');

  async function configFrom(log: string, pcrs: string): Promise<string> {
    await fromLog(['--event-log', log, '--pcrs', pcrs]);
    return file('config.json', out);
  }

  it('exits 0 when every measurement matches and names the PCRs the config leaves out', async () => {
    const config = await configFrom(cos85, '0,4,8,9');
    out = '';
    expect(await run(['diff', '--config', config, '--event-log', cos85])).toBe(0);
    expect(out.match(/^PCR \d+: match$/gm)).toHaveLength(4);
    expect(out).toMatch(/PCRs the log extends but the config does not name: 1,2,3,5,6,7/);
    expect(out).toMatch(/summary: 4 match, 0 mismatch, 0 warnOnly mismatch \(sha256\)/);
  });

  it('exits 1 for another boot and lists the events of exactly the differing PCRs', async () => {
    const config = await configFrom(cos85, '0,4,8,9');
    out = '';
    expect(await run(['diff', '--config', config, '--event-log', cos93, '--json'])).toBe(1);
    const report = (JSON.parse(out) as { result: DiffReport }).result;
    expect(report.match).toBe(false);
    const byPcr = new Map(report.pcrs.map((r) => [r.pcr, r]));
    const replay = lib.replayTcgEventLog(readFileSync(cos93));
    for (const r of report.pcrs) {
      const actual = Buffer.from(replay.pcrs.get(r.pcr) ?? []).toString('hex');
      expect(r.actual).toBe(actual);
      if (r.status === 'match') expect(r.events).toBeUndefined();
      else {
        // The listed events are the log's events of that PCR, and they replay to the actual value.
        expect(r.events?.map((e) => e.seq)).toEqual(replay.events.get(r.pcr)?.map((e) => e.seq));
        let pcr = Buffer.alloc(32);
        for (const e of r.events ?? [])
          pcr = (await import('node:crypto'))
            .createHash('sha256')
            .update(pcr)
            .update(Buffer.from(e.digest, 'hex'))
            .digest();
        expect(pcr.toString('hex')).toBe(actual);
      }
    }
    // The kernel command line differs between COS 85 and 93, so PCR 8 differs and shows it.
    expect(byPcr.get(8)?.status).toBe('mismatch');
    expect(
      byPcr.get(8)?.events?.some((e) => /^"kernel_cmdline: \/syslinux\/vmlinuz\.A /.test(e.description)),
    ).toBe(true);
    out = '';
    expect(await run(['diff', '--config', config, '--event-log', cos93])).toBe(1);
    expect(out).toMatch(
      /^PCR 8: MISMATCH\n {2}expected [0-9a-f]{64}\n {2}actual {3}[0-9a-f]{64}\n {2}events that extended PCR 8/m,
    );
    expect(out).toMatch(/ {4}#\d+ EV_IPL [0-9a-f]{64} "/);
  });

  it('a warnOnly mismatch is reported but exits 0; an unmeasured PCR compares as its reset value', async () => {
    const config = file(
      'c.json',
      JSON.stringify({
        measurements: {
          '4': { expected: 'ab'.repeat(32), warnOnly: true },
          '15': '00'.repeat(32),
          '16': { expected: '01'.repeat(32), warnOnly: true },
        },
      }),
    );
    expect(await run(['diff', '--config', config, '--event-log', cos85])).toBe(0);
    expect(out).toMatch(/^PCR 4: mismatch \(warnOnly\)$/m);
    expect(out).toMatch(/^PCR 15: match \(no events in the log: reset value\)$/m);
    expect(out).toMatch(/^PCR 16: mismatch \(warnOnly\) \(no events in the log: reset value\)$/m);
    expect(out).toMatch(/summary: 1 match, 0 mismatch, 2 warnOnly mismatch/);
  });

  it('picks the sha384 bank for 48-byte values (TDX) and refuses a mismatching --bank', async () => {
    const config = await (async () => {
      await fromLog(['--event-log', v('go-tdx-guest/testdata/ccel/ccel_data.dat'), '--bank', 'sha384']);
      return file('tdx.json', out);
    })();
    out = '';
    expect(
      await run(['diff', '--config', config, '--event-log', v('go-tdx-guest/testdata/ccel/ccel_data.dat')]),
    ).toBe(0);
    expect(out).toMatch(/summary: 3 match, 0 mismatch, 0 warnOnly mismatch \(sha384\)/);
    expect(
      await run([
        'diff',
        '--config',
        config,
        '--event-log',
        v('go-tdx-guest/testdata/ccel/ccel_data.dat'),
        '--bank',
        'sha256',
      ]),
    ).toBe(2);
    expect(err).toMatch(/tdx\.json: the measurements hold 48-byte values, the sha256 bank has 32/);
  });

  it('exits 2 on a bad config, with the file and the reason', async () => {
    expect(
      await run(['diff', '--config', file('bad.json', '{"measurements": {}}'), '--event-log', cos85]),
    ).toBe(2);
    expect(err).toMatch(/bad\.json: invalid measurements: no measurements given/);
    err = '';
    expect(await run(['diff', '--config', file('x.json', 'not json'), '--event-log', cos85])).toBe(2);
    expect(err).toMatch(/x\.json: invalid attestation config: not JSON/);
    err = '';
    expect(await run(['diff', '--event-log', cos85])).toBe(2);
    expect(err).toMatch(/missing required option --config/);
  });
});

describe('confboot measurements --help', () => {
  it.each([
    [['--help'], /Usage: confboot measurements <verb>/],
    [
      ['from-event-log', '--help'],
      /Usage: confboot measurements from-event-log[\s\S]*--pcrs LIST[\s\S]*--yaml/,
    ],
    [['diff', '--help'], /Usage: confboot measurements diff[\s\S]*--config F[\s\S]*Exit codes: 0/],
  ])('%j prints its help and exits 0', async (args, text) => {
    expect(await run(args)).toBe(0);
    expect(out).toMatch(text);
  });

  it('an unknown verb exits 2', async () => {
    expect(await run(['frobnicate'])).toBe(2);
    expect(err).toMatch(/unknown verb "frobnicate"/);
  });
});
