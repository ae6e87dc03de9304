/**
 * Fail-closed attestation policy: a config that enforces no measurement (every entry warnOnly) is
 * refused by the join service's validator builder at start and on reload, unless
 * --allow-unenforced-measurements is given, which then logs an error each time such a config loads.
 * Through the production wiring (validatorBuilder → UpdatableValidator → the real qemu-vtpm
 * validator) with real files.
 */
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ReloadOutcome } from '../../../src/adapters/attestation/updatable/updatable-validator.js';
import { UpdatableValidator } from '../../../src/adapters/attestation/updatable/updatable-validator.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { parseJoinServiceFlags } from '../../../src/app/cli/join-service.js';
import { validatorBuilder } from '../../../src/app/join-service/production.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-policy-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
const clock = new SystemClock();
const ZERO = '00'.repeat(32);

function config(warnOnly: boolean): string {
  return JSON.stringify({
    measurements: { 4: { expected: ZERO, warnOnly }, 15: { expected: ZERO, warnOnly } },
  });
}

function write(path: string, text: string): void {
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
}

async function start(path: string, allow: boolean, logger = new FakeLogger()) {
  const outcomes: ReloadOutcome[] = [];
  const validator = await UpdatableValidator.start({
    path,
    build: validatorBuilder('qemu-vtpm', {}, clock, logger, { allowUnenforcedMeasurements: allow }),
    logger,
    onReload: (o) => outcomes.push(o),
  });
  cleanups.push(() => validator.close());
  return { validator, outcomes, logger };
}

describe('attestation config that enforces no measurement', () => {
  it('is refused at start, naming the opt-in flag', async () => {
    const path = join(tmp(), 'attestationConfig');
    write(path, config(true));
    await expect(start(path, false)).rejects.toMatchObject({
      code: 'failed-precondition',
      message: expect.stringMatching(
        /enforces no measurement \(all 2 are warnOnly\).*--allow-unenforced-measurements/,
      ),
    });
  });

  it('is refused on reload: the last good (enforcing) validator stays', async () => {
    const path = join(tmp(), 'attestationConfig');
    write(path, config(false));
    const { validator, outcomes } = await start(path, false);
    const before = validator.oid;
    write(path, config(true));
    await validator.reload();
    const failed = outcomes.find((o) => !o.ok);
    expect(failed?.ok === false && failed.error.message).toMatch(/enforces no measurement/);
    expect(outcomes.some((o) => o.ok && o.changed)).toBe(false);
    expect(validator.oid).toBe(before);
  });

  it('is accepted with the opt-in, with an error-level SECURITY log at start and on every reload', async () => {
    const path = join(tmp(), 'attestationConfig');
    write(path, config(true));
    const { validator, logger } = await start(path, true);
    const security = () => logger.events.filter((e) => e.level === 'error' && e.msg.startsWith('SECURITY:'));
    expect(security()).toHaveLength(1);
    expect(security()[0]?.msg).toContain('accepted because --allow-unenforced-measurements is set');
    write(path, config(true).replace(ZERO, '11'.repeat(32)));
    await validator.reload();
    expect(security()).toHaveLength(2);
  });

  it('an empty measurements map stays refused even with the opt-in', () => {
    const build = validatorBuilder('qemu-vtpm', {}, clock, new FakeLogger(), {
      allowUnenforcedMeasurements: true,
    });
    expect(() => build(Buffer.from('{"measurements": {}}'))).toThrow(/no measurements/);
  });

  it('the join-service flag is off by default and on when given', () => {
    const base = [
      '--csp=qemu',
      '--attestation-variant=qemu-vtpm',
      '--attestation-config=/c',
      '--measurement-salt-file=/s',
      '--key-service-endpoint=k:9000',
    ];
    expect(parseJoinServiceFlags(base)?.allowUnenforcedMeasurements).toBe(false);
    expect(
      parseJoinServiceFlags([...base, '--allow-unenforced-measurements'])?.allowUnenforcedMeasurements,
    ).toBe(true);
  });
});
