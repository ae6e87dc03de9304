/**
 * Fail-closed attestation policy: a config must enforce at least one boot-chain register of its
 * variant at a measured value and the node-lock register (PCR 15; RTMR 2 for qemu-tdx) as zero.
 * Weak configs — only PCR 15, only registers that are zero on every machine, all warnOnly, PCR 15
 * missing or warnOnly — are refused by the join service's validator builder at start (the built CLI
 * exits 1 naming the opt-in) and on reload, unless --allow-weak-measurement-policy is given, which then
 * logs an error each time such a config loads. Through the production wiring (validatorBuilder →
 * UpdatableValidator → the real qemu-vtpm validator) with real files.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ReloadOutcome } from '../../../src/adapters/attestation/updatable/updatable-validator.js';
import { UpdatableValidator } from '../../../src/adapters/attestation/updatable/updatable-validator.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { parseJoinServiceFlags } from '../../../src/app/cli/join-service-flags.js';
import { validatorBuilder } from '../../../src/app/join-service/production.js';
import { variantEntry, variantNames } from '../../../src/app/registry/index.js';
import { checkMeasurementPolicy } from '../../../src/app/registry/policy-guard.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-policy-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
const clock = new SystemClock();
const ZERO = '00'.repeat(32);
const IMAGE = 'ab'.repeat(32);
const OPT_IN = '--allow-weak-measurement-policy';

type Entry = { expected: string; warnOnly: boolean };
const on = (expected: string): Entry => ({ expected, warnOnly: false });
const warn = (expected: string): Entry => ({ expected, warnOnly: true });
const cfg = (m: Record<string, Entry>) => JSON.stringify({ measurements: m });

/** A config that keeps the rules: the image's PCRs 4 and 12 and PCR 15 zero. */
const STRONG = cfg({ 4: on(IMAGE), 12: on('cd'.repeat(32)), 15: on(ZERO) });

function write(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

async function start(path: string, allow: boolean, logger = new FakeLogger()) {
  const outcomes: ReloadOutcome[] = [];
  const validator = await UpdatableValidator.start({
    path,
    build: validatorBuilder('qemu-vtpm', {}, clock, logger, { allowWeakMeasurementPolicy: allow }),
    logger,
    onReload: (o) => outcomes.push(o),
  });
  cleanups.push(() => validator.close());
  return { validator, outcomes, logger };
}

const WEAK: Array<[string, string, RegExp]> = [
  ['only PCR 15 enforced (zero)', cfg({ 15: on(ZERO) }), /no boot-chain register/],
  [
    'only registers zero on every machine (PCRs 8, 11, 13, 15)',
    cfg({ 8: on(ZERO), 11: on(ZERO), 13: on(ZERO), 15: on(ZERO) }),
    /no boot-chain register at a measured value/,
  ],
  [
    'firmware PCR 0 only (the same on every VM of a cloud, whatever it boots)',
    cfg({ 0: on(IMAGE), 15: on(ZERO) }),
    /no boot-chain register/,
  ],
  ['every measurement warnOnly', cfg({ 4: warn(IMAGE), 15: warn(ZERO) }), /no boot-chain register/],
  ['boot chain enforced but PCR 15 absent', cfg({ 4: on(IMAGE), 12: on(IMAGE) }), /PCR 15.*absent/],
  ['boot chain enforced but PCR 15 warnOnly', cfg({ 4: on(IMAGE), 15: warn(ZERO) }), /PCR 15.*warnOnly/],
  ['boot chain enforced but PCR 15 not zero', cfg({ 4: on(IMAGE), 15: on(IMAGE) }), /PCR 15.*not zero/],
  ['a boot-chain PCR enforced as all ones', cfg({ 4: on('ff'.repeat(32)), 15: on(ZERO) }), /no boot-chain/],
];

describe('attestation config that proves nothing about the node (join service)', () => {
  it.each(WEAK)('%s: refused at start, naming the rule and the opt-in', async (_name, text, rule) => {
    const path = join(tmp(), 'attestationConfig');
    write(path, text);
    const err = await start(path, false).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(rule);
    expect(err?.message).toContain(OPT_IN);
  });

  it('a config with the image PCRs and PCR 15 zero starts', async () => {
    const path = join(tmp(), 'attestationConfig');
    write(path, STRONG);
    const { validator, logger } = await start(path, false);
    expect(validator.variant).toBe('qemu-vtpm');
    expect(logger.events.filter((e) => e.msg.startsWith('SECURITY:'))).toEqual([]);
  });

  it('is refused on reload: the last good validator stays', async () => {
    const path = join(tmp(), 'attestationConfig');
    write(path, STRONG);
    const { validator, outcomes } = await start(path, false);
    write(path, cfg({ 15: on(ZERO) }));
    await validator.reload();
    const failed = outcomes.find((o) => !o.ok);
    expect(failed?.ok === false && failed.error.message).toMatch(/no boot-chain register/);
    expect(outcomes.some((o) => o.ok && o.changed)).toBe(false);
  });

  it('is accepted with the opt-in, with an error-level SECURITY log at start and on every reload', async () => {
    const path = join(tmp(), 'attestationConfig');
    write(path, cfg({ 15: on(ZERO) }));
    const { validator, logger } = await start(path, true);
    const security = () => logger.events.filter((e) => e.level === 'error' && e.msg.startsWith('SECURITY:'));
    expect(security()).toHaveLength(1);
    expect(security()[0]?.msg).toContain(`accepted because ${OPT_IN} is set`);
    write(path, cfg({ 8: on(ZERO), 15: on(ZERO) }));
    await validator.reload();
    expect(security()).toHaveLength(2);
  });

  it('an empty measurements map stays refused even with the opt-in', () => {
    const build = validatorBuilder('qemu-vtpm', {}, clock, new FakeLogger(), {
      allowWeakMeasurementPolicy: true,
    });
    expect(() => build(Buffer.from('{"measurements": {}}'))).toThrow(/no measurements/);
  });

  it('the flag is off by default; --allow-weak-measurement-policy and its older name turn it on', () => {
    const base = [
      '--csp=qemu',
      '--attestation-variant=qemu-vtpm',
      '--attestation-config=/c',
      '--measurement-salt-file=/s',
      '--key-service-endpoint=k:9000',
    ];
    expect(parseJoinServiceFlags(base)?.attestation.allowWeakMeasurementPolicy).toBe(false);
    expect(parseJoinServiceFlags([...base, OPT_IN])?.attestation.allowWeakMeasurementPolicy).toBe(true);
    expect(
      parseJoinServiceFlags([...base, '--allow-unenforced-measurements'])?.attestation
        .allowWeakMeasurementPolicy,
    ).toBe(true);
  });
});

describe('registers per variant (the registry names them)', () => {
  it('every variant names a boot chain and a node-lock register outside it', () => {
    for (const v of variantNames()) {
      const r = variantEntry(v).registers;
      expect(r.bootChain.length, v).toBeGreaterThan(0);
      expect(r.bootChain, v).not.toContain(r.nodeLock);
    }
  });

  it('qemu-tdx: MRTD/RTMR0–1 are the boot chain and RTMR 2 (index 3) the node lock', () => {
    const tdx = (m: Record<string, Entry>) => JSON.stringify({ measurements: m });
    const Z48 = '00'.repeat(48);
    const M48 = 'ab'.repeat(48);
    expect(() => checkMeasurementPolicy('qemu-tdx', tdx({ 0: on(M48), 3: on(Z48) }), false)).not.toThrow();
    expect(() => checkMeasurementPolicy('qemu-tdx', tdx({ 3: on(Z48) }), false)).toThrow(
      /MRTD, RTMR 0, RTMR 1/,
    );
    expect(() => checkMeasurementPolicy('qemu-tdx', tdx({ 2: on(M48), 4: on(Z48) }), false)).toThrow(
      /node-lock register RTMR 2 as all zero \(absent\)/,
    );
  });

  it('a weak config accepted with the opt-in yields the SECURITY line to log', () => {
    expect(checkMeasurementPolicy('aws-sev-snp', cfg({ 15: on(ZERO) }), true)).toMatch(
      /^SECURITY: the aws-sev-snp attestation config proves nothing/,
    );
    expect(checkMeasurementPolicy('aws-sev-snp', STRONG, false)).toBeUndefined();
  });
});

describe('confboot join-service (built CLI)', () => {
  function joinService(config: string, extra: string[] = []): Promise<{ code: number; stderr: string }> {
    const root = resolve(import.meta.dirname, '../../..');
    const cli = join(root, 'dist/src/app/cli/main.js');
    if (!existsSync(cli)) throw new Error(`${cli} is missing: run npm run build first`);
    const dir = tmp();
    writeFileSync(join(dir, 'salt'), randomBytes(32));
    writeFileSync(join(dir, 'attestationConfig'), config);
    const args = [
      'join-service',
      ...[
        '--csp=qemu',
        '--attestation-variant=qemu-vtpm',
        `--attestation-config=${join(dir, 'attestationConfig')}`,
      ],
      ...[`--measurement-salt-file=${join(dir, 'salt')}`, '--key-service-endpoint=127.0.0.1:9'],
      ...['--api-server-endpoint=10.0.0.1:6443', '--listen=127.0.0.1:0', '--http-listen=127.0.0.1:0'],
      // Not under test here: qemu-vtpm's AK trust (the registry or this opt-in).
      '--trust-ak-as-carried',
      ...extra,
    ];
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CONFBOOT_')));
    return new Promise((done) => {
      execFile(process.execPath, [cli, ...args], { cwd: root, env, timeout: 60_000 }, (err, _out, stderr) =>
        done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stderr }),
      );
    });
  }

  it.each([
    ['only PCR 15', cfg({ 15: on(ZERO) })],
    ['only registers constant on every machine', cfg({ 8: on(ZERO), 13: on(ZERO), 15: on(ZERO) })],
  ])(
    'started with a config that enforces %s exits 1 naming the opt-in',
    async (_name, config) => {
      const { code, stderr } = await joinService(config);
      expect(code).toBe(1);
      expect(stderr).toContain(OPT_IN);
      expect(stderr).toMatch(/no boot-chain register/);
    },
    70_000,
  );
});
