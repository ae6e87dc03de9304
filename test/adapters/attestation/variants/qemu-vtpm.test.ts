/** The qemu-vtpm variant's AK trust: as carried, or the attester's registered AK only. */
import { describe, expect, it } from 'vitest';
import { CheckRecorder } from '../../../../src/adapters/attestation/shared/checks.js';
import {
  qemuVtpmChecks,
  qemuVtpmChecksWith,
} from '../../../../src/adapters/attestation/variants/qemu-vtpm.js';
import type { AkRegistry } from '../../../../src/ports/ak-registry.js';

type CheckAk = Parameters<typeof qemuVtpmChecks.checkAk>;
const docWith = (akPub: Uint8Array) => ({ attestation: { akPub } }) as unknown as CheckAk[0];
const AK = Uint8Array.of(1, 2, 3);

async function checkAk(checks: typeof qemuVtpmChecks, akPub: Uint8Array) {
  const rec = new CheckRecorder();
  const outcome = await checks
    .checkAk(docWith(akPub), undefined as unknown as CheckAk[1], new Uint8Array(), rec, {
      peerAddress: '10.0.0.2',
    })
    .then(
      () => 'passed',
      (e: unknown) => (e as Error).message,
    );
  return { outcome, checks: rec.checks };
}

const registry = (akPub: Uint8Array | undefined): AkRegistry => ({
  registeredAk: async (options) => ({ attester: `vm at ${options?.peerAddress}`, akPub }),
});

describe('qemu-vtpm checks', () => {
  it('trusts the carried AK without a registry, and has no CVM checks', async () => {
    const { outcome, checks } = await checkAk(qemuVtpmChecks, AK);
    expect(outcome).toBe('passed');
    expect(checks).toEqual([
      {
        name: 'ak-trust',
        ok: true,
        detail: 'qemu-vtpm trusts the attestation key as carried in the document',
      },
    ]);
    const rec = new CheckRecorder();
    await qemuVtpmChecks.validateCvm(docWith(AK), undefined as never, rec);
    expect(rec.checks.map((c) => [c.name, c.ok])).toEqual([['cvm', true]]);
  });

  it("with a registry, passes only the attester's registered AK", async () => {
    const ok = await checkAk(qemuVtpmChecksWith({ akTrust: registry(AK) }), AK);
    expect(ok.outcome).toBe('passed');
    expect(ok.checks[0]).toEqual({
      name: 'ak-trust',
      ok: true,
      detail: 'attestation key is the one registered for vm at 10.0.0.2',
    });
    const other = await checkAk(qemuVtpmChecksWith({ akTrust: registry(AK) }), Uint8Array.of(9));
    expect(other.outcome).not.toBe('passed');
    expect(other.checks[0]).toMatchObject({
      name: 'ak-trust',
      ok: false,
      detail: "the document's attestation key is not the one registered for vm at 10.0.0.2",
    });
    const none = await checkAk(qemuVtpmChecksWith({ akTrust: registry(undefined) }), AK);
    expect(none.outcome).not.toBe('passed');
    expect(none.checks[0]?.detail).toBe('no attestation key is registered for vm at 10.0.0.2');
  });
});
