/**
 * The qemu-vtpm AK-trust option that mini turns on: the host provisions a TPM (EK certificate from
 * swtpm_localca, AK persisted) and registers its AK for a VM; a document quoted by another TPM's AK
 * is refused even though its PCRs are exactly the expected ones, while the registered TPM's
 * document passes. Without the option (upstream's behaviour) both pass. Then the join service's
 * form of it: the registry file (`--qemu-ak-registry`) behind the attested TLS server the join
 * service runs on, which looks the AK up for the caller's source address, so a VM cannot use
 * another registered VM's AK. Real swtpms, real attested TLS on 127.0.0.x.
 */

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect as netConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decodeVtpmDocument } from '../../../src/adapters/attestation/shared/vtpm-document.js';
import { createQemuVtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import { FileQemuAkRegistry } from '../../../src/adapters/cloud/qemu/ak-registry.js';
import { attestSocket } from '../../../src/adapters/grpc/atls/connection.js';
import { AttestedTlsListener } from '../../../src/adapters/grpc/atls/listener.js';
import type { AttestedPeer } from '../../../src/adapters/grpc/atls/peer-attestation.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { createValidator } from '../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../src/domain/measurements.js';
import type { Issuer } from '../../../src/ports/issuer.js';
import { provisionTpm, registeredAkOf } from '../../../src/testbed/mini/provision.js';

const missing = ['swtpm', 'swtpm_setup', 'tpm2_quote'].filter(
  (c) => spawnSync('sh', ['-c', `command -v ${c}`]).status !== 0,
);

describe.skipIf(missing.length > 0)('mini: qemu-vtpm with the registered-AK option', () => {
  const dir = mkdtempSync(join(tmpdir(), 'confboot-ak-trust-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  async function documentFrom(stateDir: string, nonce: Buffer): Promise<Uint8Array> {
    const swtpm = await startSwtpm({ stateDir, readyTimeoutInMs: 20_000 });
    try {
      const issuer = createQemuVtpmIssuer(new Tpm2ToolsTpm({ tcti: swtpm.tcti, timeoutInMs: 60_000 }), {
        oid: variantOid('qemu-vtpm'),
      });
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

  it("the join service's registry takes the AK registered for the caller's address: another VM's AK is refused", async () => {
    // Two VMs the host registered, each with its reserved address, and a TPM it never provisioned.
    const vmA = await provisionTpm(join(dir, 'vm-a'));
    const vmB = await provisionTpm(join(dir, 'vm-b'));
    const stray = await provisionTpm(join(dir, 'stray'));
    const registryFile = join(dir, 'identities.json');
    const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
    writeFileSync(
      registryFile,
      JSON.stringify({
        'vm-a': { ip: '127.0.0.2', attestationKeyPublic: b64(vmA.akPub) },
        'vm-b': { ip: '127.0.0.3', attestationKeyPublic: b64(vmB.akPub) },
      }),
    );

    const clock = new SystemClock();
    const swtpms: SwtpmInstance[] = [];
    let listener: AttestedTlsListener | undefined;
    const attested: AttestedPeer[] = [];
    const refused: Array<{ address: string; check: unknown; message: string }> = [];
    try {
      const issuerOf = async (stateDir: string): Promise<Issuer> => {
        const swtpm = await startSwtpm({ stateDir, readyTimeoutInMs: 20_000 });
        swtpms.push(swtpm);
        return createQemuVtpmIssuer(new Tpm2ToolsTpm({ tcti: swtpm.tcti, timeoutInMs: 60_000 }), {
          oid: variantOid('qemu-vtpm'),
        });
      };
      const tpmA = await issuerOf(vmA.stateDir);
      const tpmB = await issuerOf(vmB.stateDir);
      const tpmStray = await issuerOf(stray.stateDir);
      // Every TPM is freshly started, so all PCRs are the expected ones: only the AK tells them apart.
      const pcrs = decodeVtpmDocument(
        await tpmA.issue(Buffer.alloc(32), randomBytes(32)),
      ).attestation.quotes.find((q) => q.pcrHashAlg === 11)!.pcrs;
      const policy = new MeasurementsPolicy(
        new Map([...pcrs].filter(([i]) => i < 16).map(([i, v]) => [i, { expected: v, warnOnly: false }])),
      );

      // The attested TLS server the join service runs on, with the join service's registry.
      listener = new AttestedTlsListener(
        {
          validators: [
            createValidator('qemu-vtpm', { policy, qemuAkTrust: new FileQemuAkRegistry(registryFile) }),
          ],
          clock,
          handshakeTimeoutMs: 120_000,
          deadlines: { attestationMs: 90_000, verdictMs: 30_000 },
        },
        (socket, peer) => {
          attested.push(peer);
          socket.destroy();
        },
      );
      listener.onRefused = (address, reason) =>
        refused.push({ address, check: (reason as { check?: unknown }).check, message: reason.message });
      const port = await listener.listen('127.0.0.1', 0);

      // One join attempt: the document of `issuer`, sent from `from`.
      const joinFrom = async (from: string, issuer: Issuer) => {
        const raw = netConnect({ host: '127.0.0.1', port, localAddress: from });
        raw.on('error', () => {});
        await new Promise<void>((resolve, reject) => {
          raw.once('connect', () => resolve());
          raw.once('error', reject);
        });
        const outcomesBefore = attested.length + refused.length;
        try {
          const { socket } = await attestSocket(raw, 'client', {
            issuer,
            clock,
            handshakeTimeoutMs: 120_000,
          });
          socket.destroy();
        } finally {
          // The server records its outcome around when the client learns it: wait for it (bounded).
          const end = Date.now() + 30_000;
          while (attested.length + refused.length === outcomesBefore && Date.now() < end)
            await new Promise((r) => setTimeout(r, 10));
          raw.destroy();
        }
      };
      const akTrustOf = (peer: AttestedPeer | undefined) =>
        peer?.attestation?.checks.find((c) => c.name === 'ak-trust');

      // VM A with its own AK from its own address: accepted, bound to vm-a.
      await joinFrom('127.0.0.2', tpmA);
      expect(attested.map((p) => p.address.split(':')[0])).toEqual(['127.0.0.2']);
      expect(akTrustOf(attested[0])).toMatchObject({
        ok: true,
        detail: expect.stringMatching(/vm-a \(127\.0\.0\.2\)/),
      });

      // VM B presenting a right-PCR document quoted by VM A's registered AK: refused at ak-trust.
      // The peer learns the check only; the server's refusal record says why.
      await expect(joinFrom('127.0.0.3', tpmA)).rejects.toMatchObject({
        check: 'ak-trust',
        message: expect.stringMatching(/\(check ak-trust\): ak-trust$/),
      });
      expect(refused.at(-1)?.message).toMatch(/not the one registered for vm-b \(127\.0\.0\.3\)/);
      // VM B with a TPM the host never provisioned: refused at ak-trust.
      await expect(joinFrom('127.0.0.3', tpmStray)).rejects.toMatchObject({ check: 'ak-trust' });
      // A caller at an address no VM is registered for, even with a registered AK: refused.
      await expect(joinFrom('127.0.0.4', tpmB)).rejects.toMatchObject({ check: 'ak-trust' });
      expect(refused.at(-1)?.message).toMatch(/no attestation key is registered for the caller 127\.0\.0\.4/);
      // VM B with its own AK from its own address: accepted, bound to vm-b.
      await joinFrom('127.0.0.3', tpmB);

      expect(attested).toHaveLength(2);
      expect(akTrustOf(attested[1])).toMatchObject({
        ok: true,
        detail: expect.stringMatching(/vm-b \(127\.0\.0\.3\)/),
      });
      // The server refused exactly the three, each at ak-trust, each from the address it came from.
      expect(refused.map((r) => [r.address.split(':')[0], r.check])).toEqual([
        ['127.0.0.3', 'ak-trust'],
        ['127.0.0.3', 'ak-trust'],
        ['127.0.0.4', 'ak-trust'],
      ]);
    } finally {
      await listener?.close();
      await Promise.all(swtpms.map((s) => s.stop()));
    }
  }, 240_000);
});
