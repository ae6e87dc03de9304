/**
 * Attack family: untrusted attestation keys. For azure-trustedlaunch, which pins AKs through an AK
 * certificate chaining to a configured root (production wiring via validatorBuilder with the root
 * configured; the chain is synthetic since no Azure VM exists here): an AK certified by the
 * attacker's own root, a victim's genuine AK certificate next to the attacker's key, and the
 * victim's AK public key over a quote the attacker signed. For qemu-vtpm, which trusts the AK as
 * carried: a document whose ak_pub is not the key that signed the quote, and a software key that
 * is not a restricted TPM signing key. Quotes are genuine TPM-format (soft TPM) or real swtpm ones.
 */
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AkPki, createAkPki } from './support/ak-pki.js';
import { attempt, expectIssued, expectRefused, snapshot } from './support/attack.js';
import { MutatingIssuer, SoftTpm, SoftVtpmIssuer, type SwtpmNode, softTpmNode } from './support/nodes.js';
import { startTarget, startTargetWithNode, type Target } from './support/target.js';

describe('azure-trustedlaunch: the AK must be certified by the configured root', () => {
  let target: Target;
  let pki: AkPki;
  let attackerPki: AkPki;
  let victim: SoftTpm;
  let attacker: SoftTpm;

  beforeAll(async () => {
    [pki, attackerPki, victim, attacker] = await Promise.all([
      createAkPki('Trusted AK'),
      createAkPki('Attacker'),
      softTpmNode(),
      softTpmNode(),
    ]);
    target = await startTarget({
      variant: 'azure-trustedlaunch',
      lookups: { azureAkRoots: [pki.root.toString('pem')] },
    });
  });
  afterAll(() => target?.stop());

  it('control: a node whose AK certificate chains to the configured root gets a ticket', async () => {
    const info = pki.instanceInfo(await pki.certify(victim.akPublicKeySpki()));
    const b = snapshot(target);
    const out = await attempt(
      target.endpoint,
      new SoftVtpmIssuer(victim, 'azure-trustedlaunch', { instanceInfo: info }),
    );
    await expectIssued(target, b, out);
  });

  it('an AK certified by the attacker’s own root (same names, not configured) is refused: ak-certificate', async () => {
    const info = attackerPki.instanceInfo(await attackerPki.certify(attacker.akPublicKeySpki()));
    const b = snapshot(target);
    const out = await attempt(
      target.endpoint,
      new SoftVtpmIssuer(attacker, 'azure-trustedlaunch', { instanceInfo: info }),
    );
    const [audit] = await expectRefused(target, b, out, {
      code: status.UNAVAILABLE,
      check: 'ak-certificate',
    });
    expect(audit?.detail).toContain('is not signed by a trusted root or given intermediate');
  });

  it('a victim’s genuine AK certificate presented with the attacker’s own AK is refused: ak-trust (untrusted attestation public key)', async () => {
    const victimInfo = pki.instanceInfo(await pki.certify(victim.akPublicKeySpki()));
    const b = snapshot(target);
    const out = await attempt(
      target.endpoint,
      new SoftVtpmIssuer(attacker, 'azure-trustedlaunch', { instanceInfo: victimInfo }),
    );
    const [audit] = await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'ak-trust' });
    expect(audit?.detail).toContain(
      'untrusted attestation public key: it differs from the AK certificate key',
    );
  });

  it('the victim’s certified AK as ak_pub over a quote the attacker signed is refused: quote-signature', async () => {
    const victimInfo = pki.instanceInfo(await pki.certify(victim.akPublicKeySpki()));
    const forger = new MutatingIssuer(
      new SoftVtpmIssuer(attacker, 'azure-trustedlaunch', { instanceInfo: victimInfo }),
      (d) => ({ ...d, attestation: { ...d.attestation, akPub: victim.akPublic } }),
    );
    const b = snapshot(target);
    const out = await attempt(target.endpoint, forger);
    const [audit] = await expectRefused(target, b, out, {
      code: status.UNAVAILABLE,
      check: 'quote-signature',
    });
    expect(audit?.detail).toContain('signature does not verify with the attestation key');
  });
});

describe('qemu-vtpm: the AK is trusted as carried, so it must be the key that signed the quote', () => {
  let target: Target;
  let node: SwtpmNode;

  beforeAll(async () => {
    ({ target, node } = await startTargetWithNode());
  });
  afterAll(async () => {
    await target?.stop();
    await node?.stop();
  });

  it('control: the real swtpm node gets a ticket', async () => {
    const b = snapshot(target);
    await expectIssued(target, b, await attempt(target.endpoint, node.issuer));
  });

  it('a document whose ak_pub differs from the key that signed the (real swtpm) quote is refused: quote-signature', async () => {
    const other = SoftTpm.create();
    const forger = new MutatingIssuer(node.issuer, (d) => ({
      ...d,
      attestation: { ...d.attestation, akPub: other.akPublic },
    }));
    const b = snapshot(target);
    const out = await attempt(target.endpoint, forger);
    await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'quote-signature' });
  });

  it('an attestation key that is not a restricted TPM signing key (could sign anything) is refused: ak-attributes', async () => {
    // fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|sign, without `restricted`.
    const tpm = await softTpmNode(undefined, { attributes: 0x00040072 });
    const b = snapshot(target);
    const out = await attempt(target.endpoint, new SoftVtpmIssuer(tpm));
    const [audit] = await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'ak-attributes' });
    expect(audit?.detail).toContain('are not those of a restricted signing key');
  });
});
