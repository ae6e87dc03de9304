/**
 * The join service with the production validator wiring (validatorBuilder → UpdatableValidator →
 * the real qemu-vtpm validator) and software-TPM nodes presenting genuine TPM-format quotes, over
 * attested TLS on loopback, with the real key service and CA and SIMULATED Kubernetes. A node whose
 * PCRs differ is refused during the handshake, gets no key, and is audited; after the attestation
 * config is replaced the new measurements apply without a restart.
 */
import { createHash } from 'node:crypto';
import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { UpdatableValidator } from '../../../src/adapters/attestation/updatable/updatable-validator.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { validatorBuilder } from '../../../src/app/join-service/production.js';
import { isAttestationError } from '../../../src/ports/errors.js';
import type { Variant } from '../../../src/ports/variant.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../../support/soft-tpm.js';
import { useTmpDirs } from '../../support/tmp.js';
import { type Harness, rejectionOf, startHarness, waitFor } from './harness.js';

const tmp = useTmpDirs('confboot-join-service-vtpm-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const clock = new SystemClock();
const ZERO = '00'.repeat(32);
/** PCR 4 of the good nodes' boot chain. */
const GOOD_PCR4 = createHash('sha256').update('confboot image boot loader').digest();

function writeConfig(path: string, pcr4: string): void {
  const tmpPath = `${path}.tmp`;
  writeFileSync(
    tmpPath,
    JSON.stringify({
      measurements: { 4: { expected: pcr4, warnOnly: false }, 15: { expected: ZERO, warnOnly: false } },
    }),
  );
  renameSync(tmpPath, path);
}

describe('join service with the real qemu-vtpm validator (soft TPM nodes, simulated Kubernetes)', () => {
  it('issues to a node with the expected PCRs, refuses a tampered one in the handshake, and follows a new attestation config', async () => {
    const dir = tmp();
    const configPath = join(dir, 'attestationConfig');
    writeConfig(configPath, GOOD_PCR4.toString('hex'));
    const validator = await UpdatableValidator.start({
      path: configPath,
      build: validatorBuilder('qemu-vtpm', {}, clock, silentLogger),
      logger: silentLogger,
    });
    cleanups.push(() => validator.close());
    const h: Harness = await startHarness(tmp(), { validators: [validator] });
    cleanups.push(() => h.stop());

    const goodTpm = SoftTpm.create();
    goodTpm.setPcr(SHA256, 4, GOOD_PCR4);
    const good = new SoftVtpmIssuer(goodTpm);
    const tamperedTpm = SoftTpm.create();
    tamperedTpm.extend(SHA256, 4, createHash('sha256').update('rogue bootloader').digest());
    const tampered = new SoftVtpmIssuer(tamperedTpm);

    const ticket = await h.client(good).issueJoinTicket(h.endpoint, await h.joinRequest('worker-1'));
    expect(ticket.stateDiskKey).toHaveLength(32);
    const calls = h.kms.calls;

    const err = await rejectionOf(
      h.client(tampered).issueJoinTicket(h.endpoint, await h.joinRequest('worker-2')),
    );
    expect(isAttestationError(err)).toBe(true);
    expect(err.message).toMatch(/index 4|PCR 4|pcr/i);
    expect(h.kms.calls).toBe(calls);
    await waitFor(() => h.logs.audits().length === 2, 'refusal audit');
    expect(h.logs.audits().map((a) => [a.rpc, a.variant, a.outcome])).toEqual([
      ['IssueJoinTicket', 'qemu-vtpm', 'issued'],
      ['attested-tls', 'unknown', 'refused'],
    ]);
    const metrics = (await h.http('/metrics')).body;
    expect(metrics).toContain(
      'confboot_attestation_validation_seconds_count{variant="qemu-vtpm",outcome="ok"} 1',
    );
    expect(metrics).toContain(
      'confboot_attestation_validation_seconds_count{variant="qemu-vtpm",outcome="refused"} 1',
    );
    // Refusals are counted by stable reason code, and the audit record carries it.
    expect(metrics).toContain(
      'confboot_attestation_refusals_total{reason_code="measurement-mismatch",check="measurements"} 1',
    );
    expect(h.logs.audits()[1]).toMatchObject({
      reason: 'measurement-mismatch',
      check: 'measurements',
      reasonCode: 'measurement-mismatch',
    });

    // The operator accepts the new boot chain: the tampered node's PCR 4 becomes the expected value.
    writeConfig(configPath, Buffer.from(tamperedTpm.banks.get(SHA256)?.get(4) as Uint8Array).toString('hex'));
    await validator.reload();
    await h.client(tampered).issueJoinTicket(h.endpoint, await h.joinRequest('worker-2'));
    const refused = await rejectionOf(
      h.client(good).issueJoinTicket(h.endpoint, await h.joinRequest('worker-3')),
    );
    expect(isAttestationError(refused)).toBe(true);
  });

  it('cannot build the dummy validator or a variant the join service does not validate', () => {
    expect(() => validatorBuilder('dummy', {}, clock, silentLogger)).toThrow(/tests only/);
    expect(() => validatorBuilder('no-such-variant' as Variant, {}, clock, silentLogger)).toThrow(
      /not supported by the join service/,
    );
  });

  it('builds nothing from an attestation config that is not a measurements map (fails closed)', () => {
    const build = validatorBuilder('qemu-vtpm', {}, clock, silentLogger);
    expect(() => build(Buffer.from('{"measurements": {}}'))).toThrow(/no measurements/);
    expect(() => build(Buffer.from('not json'))).toThrow(/not JSON/);
  });
});
