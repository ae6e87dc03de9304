/**
 * Measurement sets: an attestation config with several named reference sets, each with an optional
 * RFC 3339 notBefore/expires. A document is accepted when a set valid now matches; the validation
 * result and the join service's audit record name the set; a set expires on its own (fake clock)
 * and a node matching only it is then refused with `measurement-set-expired`; the fail-closed rules
 * apply per set; the service warns about a set about to expire. Soft TPM nodes (real quote format),
 * the real qemu-vtpm validator through the production builder, simulated Kubernetes.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { validatorBuilder } from '../../../src/app/join-service/production.js';
import { checkMeasurementPolicy } from '../../../src/app/registry/policy-guard.js';
import { buildValidator } from '../../../src/app/registry/validators.js';
import { MeasurementsPolicy, parseAttestationConfig } from '../../../src/domain/measurements.js';
import { isAttestationError } from '../../../src/ports/errors.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../../support/soft-tpm.js';
import { useTmpDirs } from '../../support/tmp.js';
import { rejectionOf, startHarness, waitFor } from './harness.js';

const tmp = useTmpDirs('confboot-sets-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const ZERO = '00'.repeat(32);
const T0 = Date.UTC(2026, 10, 21, 12, 0, 0);
const HOUR = 3_600_000;
const pcr4Of = (image: string) => createHash('sha256').update(`boot loader of image ${image}`).digest();
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function set(name: string, image: string, window: { notBefore?: number; expires?: number } = {}) {
  return {
    name,
    ...(window.notBefore === undefined ? {} : { notBefore: new Date(window.notBefore).toISOString() }),
    ...(window.expires === undefined ? {} : { expires: new Date(window.expires).toISOString() }),
    measurements: { 4: hex(pcr4Of(image)), 15: ZERO },
  };
}

/** Image A expiring 2 h after T0, image B valid from T0 on. */
const ROLLOUT = JSON.stringify({
  measurementSets: [set('image-a', 'A', { expires: T0 + 2 * HOUR }), set('image-b', 'B', { notBefore: T0 })],
});

function node(image: string): SoftVtpmIssuer {
  const tpm = SoftTpm.create();
  tpm.setPcr(SHA256, 4, pcr4Of(image));
  return new SoftVtpmIssuer(tpm);
}

async function validate(v: ReturnType<typeof buildValidator>, issuer: SoftVtpmIssuer) {
  const nonce = new Uint8Array(32).fill(3);
  return v.validate(await issuer.issue(new Uint8Array(32).fill(1), nonce), nonce);
}

describe('measurement sets in the attestation config', () => {
  it.each([
    ['both measurements and measurementSets', { measurements: { 4: ZERO }, measurementSets: [] }, /not both/],
    ['an empty list', { measurementSets: [] }, /non-empty list/],
    ['a set without a name', { measurementSets: [{ measurements: { 4: ZERO } }] }, /name must be/],
    ['a name used twice', { measurementSets: [set('a', 'A'), set('a', 'B')] }, /used twice/],
    [
      'a time that is not RFC 3339',
      { measurementSets: [{ ...set('a', 'A'), expires: '2026-12-01' }] },
      /expires must be an RFC 3339 time/,
    ],
    [
      'expires not after notBefore',
      { measurementSets: [set('a', 'A', { notBefore: T0, expires: T0 })] },
      /expires must be after notBefore/,
    ],
    ['an unknown field', { measurementSets: [{ ...set('a', 'A'), expire: 'x' }] }, /unknown field "expire"/],
    [
      'sets of different value lengths',
      { measurementSets: [set('a', 'A'), { name: 'b', measurements: { 0: '00'.repeat(48) } }] },
      /values have 48 bytes, the first set's 32/,
    ],
  ])('refuses %s', (_name, config, message) => {
    expect(() => parseAttestationConfig(config)).toThrow(message);
  });

  it('a plain measurements map is one unnamed set that never expires', () => {
    const parsed = parseAttestationConfig({ measurements: { 4: ZERO } });
    expect(parsed.sets).toEqual([
      { name: undefined, notBefore: undefined, expires: undefined, measurements: parsed.measurements },
    ]);
  });

  it('the first set valid now that matches wins; an expired set stops matching on its own', async () => {
    const clock = new FakeClock(T0);
    const v = buildValidator('qemu-vtpm', ROLLOUT, { clock });
    expect((await validate(v, node('A'))).measurementSet).toBe('image-a');
    expect((await validate(v, node('B'))).measurementSet).toBe('image-b');
    const other = await rejectionOf(validate(v, node('C')));
    expect(isAttestationError(other) && other.check).toBe('measurements');

    await clock.advance(2 * HOUR);
    const expired = await rejectionOf(validate(v, node('A')));
    expect(isAttestationError(expired) && expired.check).toBe('measurement-set-expired');
    expect(expired.message).toContain('not valid now (expired or not yet valid): image-a');
    expect((await validate(v, node('B'))).measurementSet).toBe('image-b');
  });

  it('a set is not valid before its notBefore', async () => {
    const clock = new FakeClock(T0 - HOUR);
    const v = buildValidator('qemu-vtpm', ROLLOUT, { clock });
    const early = await rejectionOf(validate(v, node('B')));
    expect(isAttestationError(early) && early.check).toBe('measurement-set-expired');
    await clock.advance(HOUR);
    expect((await validate(v, node('B'))).measurementSet).toBe('image-b');
  });

  it('when no set is valid at all, even compare refuses (fail closed)', () => {
    const parsed = parseAttestationConfig({ measurementSets: [set('old', 'A', { expires: T0 })] });
    const policy = new MeasurementsPolicy(parsed.sets, new FakeClock(T0));
    expect(() => policy.compare(new Map([[4, pcr4Of('A')]]))).toThrow(/no measurement set is valid now/);
  });

  it('the fail-closed rules apply per set: one weak set refuses the config, naming it', () => {
    const weak = JSON.stringify({
      measurementSets: [set('image-a', 'A'), { name: 'lax', measurements: { 15: ZERO } }],
    });
    expect(() => checkMeasurementPolicy('qemu-vtpm', weak, false)).toThrow(
      /\(measurement set lax\) proves nothing about the node: it enforces no boot-chain register/,
    );
    expect(checkMeasurementPolicy('qemu-vtpm', ROLLOUT, false)).toBeUndefined();
  });

  it('the join service warns at load and (hourly) on a match when a set expires within the window', async () => {
    const clock = new FakeClock(T0 + HOUR);
    const logger = new FakeLogger();
    const build = validatorBuilder('qemu-vtpm', {}, clock, logger, { setExpiryWarningMs: 2 * HOUR });
    const v = build(Buffer.from(ROLLOUT));
    const warnings = () => logger.events.filter((e) => e.level === 'warn').map((e) => e.msg);
    expect(warnings()).toEqual([
      expect.stringMatching(/^Measurement set image-a expires at .* \(in 60 min\)/),
    ]);
    await validate(v, node('A'));
    await validate(v, node('A'));
    await validate(v, node('B'));
    expect(warnings()).toHaveLength(2);
    await clock.advance(HOUR - 1);
    const lastMinute = buildValidator('qemu-vtpm', ROLLOUT, { clock });
    expect((await validate(lastMinute, node('A'))).measurementSet).toBe('image-a');
    // A long way off: no warning.
    const quiet = new FakeLogger();
    validatorBuilder('qemu-vtpm', {}, new FakeClock(T0 - 48 * HOUR), quiet)(Buffer.from(ROLLOUT));
    expect(quiet.events.filter((e) => e.level === 'warn')).toEqual([]);
  });

  it('the join service audit record names the matched set; an expired set refuses in the handshake', async () => {
    // The service (its attested TLS and its ticket issuer) and the validator share one clock, which
    // starts at the real time so the nodes' TLS certificates are valid on it.
    const t0 = Date.now();
    const rollout = JSON.stringify({
      measurementSets: [set('image-a', 'A', { expires: t0 + HOUR }), set('image-b', 'B', { notBefore: t0 })],
    });
    const clock = new FakeClock(t0);
    const validator = validatorBuilder('qemu-vtpm', {}, clock, new FakeLogger())(Buffer.from(rollout));
    const h = await startHarness(tmp(), { validators: [validator], clock });
    cleanups.push(() => h.stop());
    await h.client(node('A')).issueJoinTicket(h.endpoint, await h.joinRequest('worker-1'));
    await h.client(node('B')).issueJoinTicket(h.endpoint, await h.joinRequest('worker-2'));
    await waitFor(() => h.logs.audits().length === 2, 'two audits');
    expect(h.logs.audits().map((a) => [a.outcome, a.measurementSet])).toEqual([
      ['issued', 'image-a'],
      ['issued', 'image-b'],
    ]);
    await clock.advance(HOUR + 1000);
    const err = await rejectionOf(
      h.client(node('A')).issueJoinTicket(h.endpoint, await h.joinRequest('worker-3')),
    );
    expect(err.message).toMatch(
      /refused by the peer \(check measurement-set-expired\): measurement-set-expired(: PCR 4)?$/,
    );
    await waitFor(() => h.logs.audits().length === 3, 'refusal audit');
    expect(h.logs.audits()[2]).toMatchObject({ outcome: 'refused', reason: 'measurement-set-expired' });
  });
});
