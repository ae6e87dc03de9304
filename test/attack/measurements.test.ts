/**
 * Attack family: genuine, session-bound quotes of the wrong machine state, against the real join
 * service validating qemu-vtpm with the demo image's expected PCRs — a node that booted another
 * kernel command line (enforced PCR mismatch), a node already bootstrapped (PCR 15 extended by the
 * real node-lock marker), and documents that carry only SHA-1 quotes. Real swtpm nodes.
 */
import { randomBytes } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQemuVtpmIssuer } from '../../src/adapters/attestation/vtpm/issuer.js';
import { expectedPcr15, Pcr15Marker } from '../../src/adapters/tpm/pcr15-marker.js';
import { variantOid } from '../../src/app/registry/index.js';
import { isAttestationError } from '../../src/ports/errors.js';
import { GOOD_BOOT, replayBoot, TAMPERED_BOOT } from '../../src/testbed/demo/boot-measurements.js';
import { attempt, expectIssued, expectRefused, snapshot } from './support/attack.js';
import {
  MutatingIssuer,
  SoftVtpmIssuer,
  type SwtpmNode,
  softTpmNode,
  startSwtpmNode,
} from './support/nodes.js';
import { startTarget, type Target } from './support/target.js';

const SHA1 = 0x0004;
const SHA256 = 0x000b;
const hex = (b: Uint8Array | undefined) => Buffer.from(b ?? new Uint8Array()).toString('hex');

let target: Target;
const nodes: SwtpmNode[] = [];

beforeAll(async () => {
  target = await startTarget();
});
afterAll(async () => {
  await target?.stop();
  await Promise.all(nodes.map((n) => n.stop()));
});

async function swtpmNode(boot = GOOD_BOOT): Promise<SwtpmNode> {
  const n = await startSwtpmNode(boot);
  nodes.push(n);
  return n;
}

describe('measurements (real swtpm nodes, enforced demo-image PCRs)', () => {
  it('an enforced PCR mismatch (kernel command line changed) is refused: measurements; the attacker learns the register only, the audit has the values', async () => {
    const tampered = await swtpmNode(TAMPERED_BOOT);
    const expected = replayBoot(GOOD_BOOT).get(12);
    const actual = replayBoot(TAMPERED_BOOT).get(12);
    const b = snapshot(target);
    const out = await attempt(target.endpoint, tampered.issuer);
    const [audit] = await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'measurements' });
    // The service's verdict names the failed check and the register, never what to forge.
    expect(out.refusal?.message).toBe('refused by the peer (check measurements): measurements: PCR 12');
    expect(out.refusal?.message).not.toContain(hex(expected));
    expect(out.refusal?.message).not.toMatch(/[0-9a-f]{16}/);
    // The service's own audit record lists expected vs actual, as text and as fields.
    const line = `PCR12: expected ${hex(expected)}, got ${hex(actual)}`;
    expect(audit?.detail).toContain(line);
    expect(audit?.mismatches).toEqual([
      { index: 12, expected: hex(expected), actual: hex(actual), warnOnly: false },
    ]);
    // Only PCR 12 differs: 4 and 9 (same boot loader and kernel) are not listed.
    expect(audit?.detail).not.toMatch(/PCR(4|9):/);
  });

  it('PCR 15 already set (the node was bootstrapped; the real marker extended it) is refused: measurements', async () => {
    const node = await swtpmNode();
    const b0 = snapshot(target);
    await expectIssued(target, b0, await attempt(target.endpoint, node.issuer));

    const clusterId = randomBytes(32);
    const marker = new Pcr15Marker(node.tpm);
    await marker.markBootstrapped(clusterId);
    expect(await marker.isBootstrapped()).toBe(true);
    const b = snapshot(target);
    const out = await attempt(target.endpoint, node.issuer);
    const [audit] = await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'measurements' });
    expect(out.refusal?.message).toBe('refused by the peer (check measurements): measurements: PCR 15');
    expect(audit?.detail).toContain(
      `PCR15: expected ${'00'.repeat(32)}, got ${hex(expectedPcr15(clusterId))}`,
    );
  });

  it('a document with only a SHA-1 quote (real swtpm SHA-1 bank, good boot) is refused: sha256-quote', async () => {
    const node = await swtpmNode();
    const both = createQemuVtpmIssuer(node.tpm, { oid: variantOid('qemu-vtpm'), sha1Quoter: node.tpm });
    const sha1Only = new MutatingIssuer(both, (d) => ({
      ...d,
      attestation: { ...d.attestation, quotes: d.attestation.quotes.filter((q) => q.pcrHashAlg === SHA1) },
    }));
    // Control: the same node's two-bank document is accepted (the SHA-256 quote is the one compared).
    const b0 = snapshot(target);
    await expectIssued(target, b0, await attempt(target.endpoint, both));

    const b = snapshot(target);
    const out = await attempt(target.endpoint, sha1Only);
    const [audit] = await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'sha256-quote' });
    expect(audit?.detail).toContain('no sha256 quote (document has SHA1); SHA-1 quotes are not accepted');
  });

  it('a soft TPM with only a SHA-1 bank (genuine TPM-format quote) is refused: sha256-quote', async () => {
    const tpm = await softTpmNode(GOOD_BOOT, { banks: [SHA1] });
    const b = snapshot(target);
    const out = await attempt(target.endpoint, new SoftVtpmIssuer(tpm));
    await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'sha256-quote' });
  });

  it('a valid SHA-1 quote next to a SHA-256 quote whose PCR values were rewritten to the expected ones is refused: pcr-digest', async () => {
    const tampered = await swtpmNode(TAMPERED_BOOT);
    const good12 = replayBoot(GOOD_BOOT).get(12) as Uint8Array;
    const forger = new MutatingIssuer(
      createQemuVtpmIssuer(tampered.tpm, { oid: variantOid('qemu-vtpm'), sha1Quoter: tampered.tpm }),
      (d) => ({
        ...d,
        attestation: {
          ...d.attestation,
          quotes: d.attestation.quotes.map((q) =>
            q.pcrHashAlg === SHA256 ? { ...q, pcrs: new Map(q.pcrs).set(12, good12) } : q,
          ),
        },
      }),
    );
    const b = snapshot(target);
    const out = await attempt(target.endpoint, forger);
    await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'pcr-digest' });
    expect(isAttestationError(out.refusal)).toBe(true);
  });
});
