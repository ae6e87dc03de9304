/**
 * Attack family: a genuine, session-bound document from a real swtpm node, tampered on the way out
 * — quote bytes, PCR values, the signature, the user data — against the real join service
 * validating qemu-vtpm. Each is refused in the attested TLS handshake with the exact check, and
 * nothing is issued.
 */
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { replayBoot, TAMPERED_BOOT } from '../../src/testbed/demo/boot-measurements.js';
import { attempt, expectIssued, expectRefused, snapshot } from './support/attack.js';
import { flipBit, MutatingIssuer, type SwtpmNode, sha256, withSha256Quote } from './support/nodes.js';
import { startTargetWithNode, type Target } from './support/target.js';

let target: Target;
let node: SwtpmNode;

beforeAll(async () => {
  ({ target, node } = await startTargetWithNode());
});
afterAll(async () => {
  await target?.stop();
  await node?.stop();
});

/** Tampers with this connection's genuine document, then expects the exact refusal. */
async function expectTamperRefused(
  tamper: ConstructorParameters<typeof MutatingIssuer>[1],
  check: string,
  message?: string | RegExp,
): Promise<void> {
  const s = snapshot(target);
  const out = await attempt(target.endpoint, new MutatingIssuer(node.issuer, tamper));
  const [audit] = await expectRefused(target, s, out, { code: status.UNAVAILABLE, check });
  if (message !== undefined) expect(audit?.detail).toMatch(message);
}

describe('tampered documents (real swtpm quotes, qemu-vtpm join service)', () => {
  it('control: the untouched document (decoded and re-encoded by the tamper harness) gets a ticket', async () => {
    const s = snapshot(target);
    await expectIssued(target, s, await attempt(target.endpoint, new MutatingIssuer(node.issuer, (d) => d)));
  });

  it('a flipped bit in the quote’s PCR digest is refused: quote-signature', async () => {
    await expectTamperRefused(
      (d) => withSha256Quote(d, (q) => ({ ...q, quote: flipBit(q.quote, -1) })),
      'quote-signature',
      /signature does not verify with the attestation key/,
    );
  });

  it('a flipped bit in the quote’s extraData (nonce) is refused: quote-signature', async () => {
    // TPMS_ATTEST: magic(4) type(2) qualifiedSigner(2+34) extraData(2+32): byte 44 is inside extraData.
    await expectTamperRefused(
      (d) => withSha256Quote(d, (q) => ({ ...q, quote: flipBit(q.quote, 44) })),
      'quote-signature',
    );
  });

  it('a quote whose TPM_GENERATED magic was changed is refused: quote-format', async () => {
    await expectTamperRefused(
      (d) => withSha256Quote(d, (q) => ({ ...q, quote: flipBit(q.quote, 3) })),
      'quote-format',
      /is not TPM_GENERATED_VALUE/,
    );
  });

  it('a quote cut short is refused: quote-format', async () => {
    await expectTamperRefused(
      (d) => withSha256Quote(d, (q) => ({ ...q, quote: q.quote.subarray(0, q.quote.length - 10) })),
      'quote-format',
    );
  });

  it('a PCR value changed after quoting (PCR 12 set to another boot’s value) is refused: pcr-digest', async () => {
    const other = replayBoot(TAMPERED_BOOT).get(12) as Uint8Array;
    await expectTamperRefused(
      (d) => withSha256Quote(d, (q) => ({ ...q, pcrs: new Map(q.pcrs).set(12, other) })),
      'pcr-digest',
      /PCR digest [0-9a-f]{64} does not match the supplied PCR values/,
    );
  });

  it('a PCR value flipped by one bit (PCR 0) is refused: pcr-digest', async () => {
    await expectTamperRefused(
      (d) =>
        withSha256Quote(d, (q) => ({
          ...q,
          pcrs: new Map(q.pcrs).set(0, flipBit(q.pcrs.get(0) as Uint8Array, 0)),
        })),
      'pcr-digest',
    );
  });

  it('a PCR dropped from the supplied values (PCR 15 hidden) is refused: pcr-selection', async () => {
    await expectTamperRefused(
      (d) =>
        withSha256Quote(d, (q) => {
          const pcrs = new Map(q.pcrs);
          pcrs.delete(15);
          return { ...q, pcrs };
        }),
      'pcr-selection',
    );
  });

  it('a flipped bit in the signature is refused: quote-signature', async () => {
    await expectTamperRefused(
      (d) => withSha256Quote(d, (q) => ({ ...q, rawSig: flipBit(q.rawSig, -1) })),
      'quote-signature',
      /signature does not verify/,
    );
  });

  it('a signature cut short is refused: signature-format', async () => {
    await expectTamperRefused(
      (d) => withSha256Quote(d, (q) => ({ ...q, rawSig: q.rawSig.subarray(0, 40) })),
      'signature-format',
    );
  });

  it('the document’s UserData replaced (quote kept) is refused: extra-data', async () => {
    await expectTamperRefused(
      (d) => ({ ...d, userData: sha256('another TLS key') }),
      'extra-data',
      /wrong nonce or user data/,
    );
  });

  it('InstanceInfo added to a qemu-vtpm document after quoting is refused: extra-data', async () => {
    await expectTamperRefused(
      (d) => ({ ...d, instanceInfo: new TextEncoder().encode('{"zone":"x"}') }),
      'extra-data',
    );
  });
});
