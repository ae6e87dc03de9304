/**
 * The qemu-vtpm AK-trust option that mini turns on: the host provisions a TPM (EK certificate from
 * swtpm_localca, AK persisted) and registers its AK for a VM; a document quoted by another TPM's AK
 * is refused even though its PCRs are exactly the expected ones, while the registered TPM's
 * document passes. Without the option (upstream's behaviour) both pass. Real swtpms on loopback.
 */

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeVtpmDocument } from '../../src/adapters/attestation/shared/vtpm-document.js';
import { createQemuVtpmIssuer } from '../../src/adapters/attestation/vtpm/issuer.js';
import { startSwtpm } from '../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../src/adapters/tpm/tpm2-tools-tpm.js';
import { createValidator } from '../../src/app/attestation/validators.js';
import { provisionTpm, registeredAkOf } from '../../src/app/mini/provision.js';
import { MeasurementsPolicy } from '../../src/domain/measurements.js';

const missing = ['swtpm', 'swtpm_setup', 'tpm2_quote'].filter(
  (c) => spawnSync('sh', ['-c', `command -v ${c}`]).status !== 0,
);

describe.skipIf(missing.length > 0)('mini: qemu-vtpm with the registered-AK option', () => {
  const dir = mkdtempSync(join(tmpdir(), 'confboot-ak-trust-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function documentFrom(stateDir: string, nonce: Buffer): Promise<Uint8Array> {
    const swtpm = await startSwtpm({ stateDir, readyTimeoutInMs: 20_000 });
    try {
      const issuer = createQemuVtpmIssuer(new Tpm2ToolsTpm({ tcti: swtpm.tcti, timeoutInMs: 60_000 }));
      return await issuer.issue(Buffer.alloc(32), nonce);
    } finally {
      await swtpm.stop();
    }
  }

  it("refuses a document quoted by an AK other than the VM's registered one, PCRs notwithstanding", async () => {
    const vm = await provisionTpm(join(dir, 'worker-0'));
    const other = await provisionTpm(join(dir, 'impostor'));
    expect(Buffer.from(vm.akPub).equals(Buffer.from(other.akPub))).toBe(false);

    const nonce = randomBytes(32);
    const good = await documentFrom(vm.stateDir, nonce);
    const forged = await documentFrom(other.stateDir, nonce);
    // The impostor's PCRs are exactly the expected ones (both TPMs are freshly started).
    const pcrsOf = (d: Uint8Array) =>
      decodeVtpmDocument(d).attestation.quotes.find((q) => q.pcrHashAlg === 11)!.pcrs;
    const expected = pcrsOf(good);
    expect([...pcrsOf(forged)].map(([i, v]) => [i, Buffer.from(v).toString('hex')])).toEqual(
      [...expected].map(([i, v]) => [i, Buffer.from(v).toString('hex')]),
    );
    const policy = new MeasurementsPolicy(
      new Map([...expected].filter(([i]) => i < 16).map(([i, v]) => [i, { expected: v, warnOnly: false }])),
    );

    const trusting = createValidator('qemu-vtpm', {
      policy,
      qemuAkTrust: registeredAkOf('worker-0', vm.akPub),
    });
    const ok = await trusting.validate(good, nonce);
    expect(ok.checks.find((c) => c.name === 'ak-trust')?.detail).toMatch(/registered for worker-0/);
    await expect(trusting.validate(forged, nonce)).rejects.toMatchObject({
      check: 'ak-trust',
      message: expect.stringMatching(/not the one registered for worker-0/),
    });
    // A VM with nothing registered is refused too.
    const none = createValidator('qemu-vtpm', { policy, qemuAkTrust: registeredAkOf('worker-9', undefined) });
    await expect(none.validate(good, nonce)).rejects.toMatchObject({ check: 'ak-trust' });
    // Upstream's behaviour without the option: the forged document passes.
    await expect(createValidator('qemu-vtpm', { policy }).validate(forged, nonce)).resolves.toBeDefined();
  }, 120_000);
});
