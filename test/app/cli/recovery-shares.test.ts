/**
 * `confboot recovery-shares`: re-splits an existing master secret (rotating holders). The new
 * shares name the cluster ID the nodes derive from the master secret and the measurement salt, any
 * K of them rebuild the master secret (the audited Shamir library), the files are exclusive
 * (an existing set is never overwritten) and bad input is a usage error before anything is written.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ShamirSecretSharing } from '../../../src/adapters/crypto/shamir-secret-sharing.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { MAX_RECOVERY_THRESHOLD, MIN_SPLIT_SECRET_BYTES } from '../../../src/app/cli/recovery-share-files.js';
import { run } from '../../../src/app/cli/recovery-shares.js';
import { deriveClusterId, deriveDataKey } from '../../../src/domain/key-derivation.js';
import { parseRecoveryShare } from '../../../src/domain/recovery-share-file.js';
import { DEFAULT_MAX_SHARES_PER_SOURCE, RecoveryShares } from '../../../src/domain/recovery-shares.js';
import { RecordingLogger } from '../../domain/stubs.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-recovery-shares-');
const MASTER = new Uint8Array(32).fill(0x11);
const SALT = new Uint8Array(32).fill(0x22);
const MEASUREMENT_SALT = new Uint8Array(32).fill(0x33);
const CLUSTER_ID = deriveClusterId(deriveDataKey(MASTER, SALT, 'measurementSecret', 32), MEASUREMENT_SALT);

afterEach(() => vi.restoreAllMocks());

/** Runs the command with stdout and stderr captured. */
async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  vi.spyOn(process.stdout, 'write').mockImplementation((c) => {
    out += String(c);
    return true;
  });
  vi.spyOn(process.stderr, 'write').mockImplementation((c) => {
    err += String(c);
    return true;
  });
  const code = await run(args);
  vi.restoreAllMocks();
  return { code, out, err };
}

function inputs(): { dir: string; args: string[] } {
  const dir = tmp();
  const master = join(dir, 'master.json');
  writeFileSync(
    master,
    JSON.stringify({
      key: Buffer.from(MASTER).toString('base64'),
      salt: Buffer.from(SALT).toString('base64'),
    }),
  );
  const salt = join(dir, 'measurement-salt.bin');
  writeFileSync(salt, MEASUREMENT_SALT);
  return { dir, args: ['--master-secret-file', master, '--measurement-salt-file', salt] };
}

describe('confboot recovery-shares', () => {
  it('writes N shares of the running cluster; any K of them rebuild the master secret', async () => {
    const { args } = inputs();
    const out = tmp();
    const r = await cli([
      ...args,
      '--recovery-shares',
      '3',
      '--recovery-threshold',
      '2',
      '--recovery-share-dir',
      out,
    ]);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toBe(`Cluster ID: ${Buffer.from(CLUSTER_ID).toString('hex')}\n`);
    expect(r.err).toMatch(/wrote 3 shares \(any 2 recover the cluster\)/);
    expect(r.err).not.toContain(Buffer.from(MASTER).toString('base64'));
    const files = readdirSync(out).sort();
    expect(files).toEqual([1, 2, 3].map((i) => `recovery-share-${i}-of-3.json`));
    const shares = files.map((f) => new Uint8Array(readFileSync(join(out, f))));
    for (const [i, s] of shares.entries())
      expect(parseRecoveryShare(s)).toMatchObject({
        index: i + 1,
        threshold: 2,
        total: 3,
        clusterId: CLUSTER_ID,
      });
    const held = new RecoveryShares({
      clock: new SystemClock(),
      sharing: new ShamirSecretSharing(),
      logger: new RecordingLogger(),
    });
    let rebuilt: Uint8Array | undefined;
    const check = async (c: { masterSecret: Uint8Array }) => {
      rebuilt = new Uint8Array(c.masterSecret);
    };
    expect(await held.add(shares[2] as Uint8Array, check)).toMatchObject({ recovered: false });
    expect(await held.add(shares[0] as Uint8Array, check)).toMatchObject({ recovered: true });
    expect(rebuilt).toEqual(MASTER);
  });

  it('K above the shares a waiting node keeps from one source is a usage error before anything is written; K at that cap splits', async () => {
    const { args } = inputs();
    expect(MAX_RECOVERY_THRESHOLD).toBe(DEFAULT_MAX_SHARES_PER_SOURCE);
    const cap = MAX_RECOVERY_THRESHOLD;
    const empty = tmp();
    for (const extra of [
      ['--recovery-shares', String(cap + 8), '--recovery-threshold', String(cap + 1)],
      // K defaults to N.
      ['--recovery-shares', String(cap + 1)],
    ]) {
      const r = await cli([...args, ...extra, '--recovery-share-dir', empty]);
      expect(r.code, r.err).toBe(2);
      expect(r.err).toContain(
        `K = ${cap + 1} is more than the ${cap} shares a waiting node keeps from one source`,
      );
    }
    expect(readdirSync(empty)).toEqual([]);
    const atCap = await cli([
      ...args,
      '--recovery-shares',
      String(cap + 1),
      '--recovery-threshold',
      String(cap),
      '--recovery-share-dir',
      empty,
    ]);
    expect(atCap.code, atCap.err).toBe(0);
    expect(readdirSync(empty)).toHaveLength(cap + 1);
  });

  it('a master secret shorter than 32 bytes is a usage error before anything is written: splits need 32-byte secrets', async () => {
    const { dir, args } = inputs();
    const short = join(dir, 'short-master.json');
    writeFileSync(
      short,
      JSON.stringify({
        key: Buffer.alloc(16, 0x11).toString('base64'),
        salt: Buffer.from(SALT).toString('base64'),
      }),
    );
    const empty = tmp();
    const r = await cli([
      '--master-secret-file',
      short,
      ...args.slice(2),
      '--recovery-shares',
      '3',
      '--recovery-threshold',
      '2',
      '--recovery-share-dir',
      empty,
    ]);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain(
      `the master secret has 16 bytes; a split needs at least ${MIN_SPLIT_SECRET_BYTES}`,
    );
    expect(r.out).toBe('');
    expect(readdirSync(empty)).toEqual([]);
  });

  it('never overwrites an existing set, and refuses bad input before writing anything', async () => {
    const { args } = inputs();
    const out = tmp();
    const split = [...args, '--recovery-shares', '2', '--recovery-share-dir', out];
    expect((await cli(split)).code).toBe(0);
    const before = readFileSync(join(out, 'recovery-share-1-of-2.json'));
    const again = await cli(split);
    expect(again.code).toBe(1);
    expect(again.err).toMatch(/EEXIST/);
    expect(readFileSync(join(out, 'recovery-share-1-of-2.json'))).toEqual(before);
    const empty = tmp();
    for (const [extra, message] of [
      [['--recovery-shares', '1'], /N ≥ 2/],
      [['--recovery-shares', '3', '--recovery-threshold', '4'], /--recovery-shares\/--recovery-threshold/],
      [['--recovery-shares', '2', '--recovery-holder-key', 'one.pem'], /give 2 keys/],
    ] as const) {
      const r = await cli([...args, ...extra, '--recovery-share-dir', empty]);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(message);
    }
    const missing = await cli([
      '--master-secret-file',
      join(empty, 'none.json'),
      '--measurement-salt-file',
      'x',
      '--recovery-shares',
      '2',
    ]);
    expect(missing.code).toBe(2);
    expect(missing.err).toMatch(/--master-secret-file .*ENOENT/);
    expect(readdirSync(empty)).toEqual([]);
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.out).toMatch(/--measurement-salt-file/);
  });
});
