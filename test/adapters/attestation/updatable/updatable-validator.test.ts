/**
 * UpdatableValidator with real files in temp dirs: plain rewrites, write-then-rename replacement,
 * ConfigMap-style `..data` symlink swaps, invalid updates, close(), and validations in flight during
 * a swap. Validators are real qemu-vtpm validators over documents from the soft TPM; waits are bounded.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ReloadOutcome,
  UpdatableValidator,
} from '../../../../src/adapters/attestation/updatable/updatable-validator.js';
import { createValidator } from '../../../../src/app/registry/validators.js';
import { MeasurementsPolicy, parseAttestationConfig } from '../../../../src/domain/measurements.js';
import { AttestationError } from '../../../../src/ports/errors.js';
import type { ValidationResult, Validator } from '../../../../src/ports/validator.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../../../support/soft-tpm.js';
import { useTmpDirs } from '../../../support/tmp.js';

const tmp = useTmpDirs('confboot-updatable-');
const tpm = SoftTpm.create();
const pcr4 = createHash('sha256').update('image A').digest();
tpm.setPcr(SHA256, 4, pcr4);
const userData = randomBytes(32);
const nonce = randomBytes(32);
const doc = await new SoftVtpmIssuer(tpm).issue(userData, nonce);

const configFor = (v: Buffer) =>
  JSON.stringify({ measurements: { '4': { expected: v.toString('hex'), warnOnly: false } } });
const GOOD = configFor(pcr4);
const OTHER = configFor(Buffer.alloc(32, 0xee));

function logger() {
  const errors: string[] = [];
  const l = {
    errors,
    debug() {},
    info() {},
    warn() {},
    error: (msg: string) => errors.push(msg),
    child: () => l,
  };
  return l;
}

const build = (bytes: Uint8Array): Validator =>
  createValidator('qemu-vtpm', {
    policy: new MeasurementsPolicy(parseAttestationConfig(Buffer.from(bytes).toString('utf8')).measurements),
  });

/** Starts an UpdatableValidator whose reload outcomes can be awaited (each wait bounded to 5 s). */
async function start(path: string, b: (bytes: Uint8Array) => Validator | Promise<Validator> = build) {
  const outcomes: ReloadOutcome[] = [];
  const waiters: Array<() => void> = [];
  const log = logger();
  const uv = await UpdatableValidator.start({
    path,
    build: b,
    logger: log,
    onReload: (o) => {
      outcomes.push(o);
      for (const w of waiters.splice(0)) w();
    },
  });
  started.push(uv);
  /** Resolves once an outcome matching `pred` has been reported. */
  const until = (pred: (o: ReloadOutcome) => boolean) =>
    new Promise<void>((ok, fail) => {
      const t = setTimeout(
        () => fail(new Error(`no matching reload within 5 s: ${JSON.stringify(outcomes)}`)),
        5000,
      );
      const check = () => {
        if (outcomes.some(pred)) {
          clearTimeout(t);
          ok();
        } else waiters.push(check);
      };
      check();
    });
  return { uv, outcomes, until, log };
}
const started: UpdatableValidator[] = [];
afterEach(async () => {
  await Promise.all(started.splice(0).map((u) => u.close()));
});

const accepts = async (v: Validator) => (await v.validate(doc, nonce)).checks.at(-1)?.ok === true;
const refusesMeasurements = async (v: Validator) => {
  const err = await v.validate(doc, nonce).catch((e: unknown) => e);
  return err instanceof AttestationError && err.check === 'measurements';
};
const changed = (o: ReloadOutcome) => o.ok && o.changed;

describe('UpdatableValidator', () => {
  it('refuses to start on a missing or invalid initial config', async () => {
    const dir = tmp();
    const path = join(dir, 'attestationConfig');
    await expect(UpdatableValidator.start({ path, build, logger: logger() })).rejects.toMatchObject({
      code: 'failed-precondition',
    });
    writeFileSync(path, '{"measurements": {}}');
    await expect(UpdatableValidator.start({ path, build, logger: logger() })).rejects.toThrow(
      /building validator.*no measurements/,
    );
  });

  it('picks up a rewritten file', async () => {
    const path = join(tmp(), 'attestationConfig');
    writeFileSync(path, GOOD);
    const { uv, until } = await start(path);
    expect([uv.variant, uv.oid]).toEqual(['qemu-vtpm', '1.3.9900.5.1']);
    expect(await accepts(uv)).toBe(true);
    writeFileSync(path, OTHER);
    await until(changed);
    expect(await refusesMeasurements(uv)).toBe(true);
  });

  it('picks up a write-then-rename replacement', async () => {
    const dir = tmp();
    const path = join(dir, 'attestationConfig');
    writeFileSync(path, OTHER);
    const { uv, until } = await start(path);
    expect(await refusesMeasurements(uv)).toBe(true);
    writeFileSync(join(dir, '.tmp-config'), GOOD);
    renameSync(join(dir, '.tmp-config'), path);
    await until(changed);
    expect(await accepts(uv)).toBe(true);
  });

  it('follows ConfigMap-style ..data symlink swaps, repeatedly', async () => {
    const dir = tmp();
    const version = (name: string, content: string) => {
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, 'attestationConfig'), content);
    };
    version('..2026_11_21_v1', GOOD);
    symlinkSync('..2026_11_21_v1', join(dir, '..data'));
    symlinkSync('..data/attestationConfig', join(dir, 'attestationConfig'));
    const { uv, until, outcomes } = await start(join(dir, 'attestationConfig'));
    expect(await accepts(uv)).toBe(true);
    const swap = (from: string, to: string, content: string) => {
      version(to, content);
      symlinkSync(to, join(dir, '..data_tmp'));
      renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      rmSync(join(dir, from), { recursive: true });
    };
    swap('..2026_11_21_v1', '..2026_11_21_v2', OTHER);
    await until(changed);
    expect(await refusesMeasurements(uv)).toBe(true);
    const before = outcomes.filter(changed).length;
    swap('..2026_11_21_v2', '..2026_11_21_v3', GOOD);
    await until(() => outcomes.filter(changed).length > before);
    expect(await accepts(uv)).toBe(true);
  });

  it('keeps the last good validator on an invalid update, logs it, and recovers on the next good one', async () => {
    const path = join(tmp(), 'attestationConfig');
    writeFileSync(path, GOOD);
    const { uv, until, log, outcomes } = await start(path);
    writeFileSync(path, '{"measurements": {"4": {"expected": "zz"}}}');
    await until((o) => !o.ok);
    expect(log.errors).toEqual(['Invalid attestation config; keeping the last good validator']);
    expect(await accepts(uv)).toBe(true);
    writeFileSync(path, OTHER);
    await until(changed);
    expect(await refusesMeasurements(uv)).toBe(true);
    expect(outcomes.some((o) => !o.ok && /updating validator/.test(o.error.message))).toBe(true);
  });

  it('refuses an update that changes the variant', async () => {
    const path = join(tmp(), 'attestationConfig');
    writeFileSync(path, GOOD);
    const other = (bytes: Uint8Array): Validator =>
      Buffer.from(bytes).toString().includes('aws')
        ? createValidator('aws-nitro-tpm', {
            policy: new MeasurementsPolicy(new Map([[4, { expected: pcr4, warnOnly: false }]])),
            amiTpmSupport: { tpmSupport: async () => 'v2.0' },
          })
        : build(bytes);
    const { uv, until } = await start(path, other);
    writeFileSync(path, `${GOOD} `.replace('}}}', '}}, "x": "aws"}'));
    await until((o) => !o.ok && /variant aws-nitro-tpm/.test(o.error.message));
    expect(uv.variant).toBe('qemu-vtpm');
  });

  it('stops watching after close(), and keeps validating with the last validator', async () => {
    const path = join(tmp(), 'attestationConfig');
    writeFileSync(path, GOOD);
    const { uv, outcomes } = await start(path);
    await uv.close();
    writeFileSync(path, OTHER);
    // Give a (wrongly) live watcher the chance to fire: a real event arrives within milliseconds.
    await new Promise((ok) => setTimeout(ok, 200));
    expect(outcomes).toEqual([]);
    expect(await accepts(uv)).toBe(true);
  });

  it('lets validations in flight finish with the validator they started with (no lock)', async () => {
    const path = join(tmp(), 'attestationConfig');
    writeFileSync(path, 'A');
    let release: () => void = () => {};
    const gate = new Promise<void>((ok) => {
      release = ok;
    });
    const labelled = (label: string): Validator => ({
      variant: 'qemu-vtpm',
      oid: '1.3.9900.5.1',
      async validate(): Promise<ValidationResult> {
        if (label === 'A') await gate;
        return { userData: Buffer.from(label), checks: [], warnings: [] };
      },
    });
    const { uv, until } = await start(path, (b) => labelled(Buffer.from(b).toString()));
    const inFlight = Array.from({ length: 10 }, () => uv.validate(doc, nonce));
    writeFileSync(path, 'B');
    await until(changed);
    // New calls use B immediately, while the ten A calls are still blocked.
    expect(Buffer.from((await uv.validate(doc, nonce)).userData).toString()).toBe('B');
    release();
    const labels = (await Promise.all(inFlight)).map((r) => Buffer.from(r.userData).toString());
    expect(labels).toEqual(Array(10).fill('A'));
  });
});
