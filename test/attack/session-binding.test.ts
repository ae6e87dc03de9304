/**
 * Attack family: attestations that are genuine but not bound to the attacker's own TLS session —
 * replayed from another connection, relayed by a man in the middle, or committing to another TLS
 * key — against the real join service validating qemu-vtpm. The quotes come from a real swtpm.
 */
import { status } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcJoinTicketClient } from '../../src/adapters/grpc/join-client.js';
import { isAttestationError } from '../../src/ports/errors.js';
import {
  attempt,
  clock,
  expectAuditedRefusal,
  expectIssued,
  expectRefused,
  joinRequest,
  snapshot,
  startRelay,
} from './support/attack.js';
import {
  CapturingIssuer,
  FixedDocumentIssuer,
  ForeignKeyIssuer,
  type SwtpmNode,
  sha256,
} from './support/nodes.js';
import { startTargetWithNode, type Target } from './support/target.js';

let target: Target;
let node: SwtpmNode;
let honest: CapturingIssuer;

beforeAll(async () => {
  ({ target, node } = await startTargetWithNode());
  honest = new CapturingIssuer(node.issuer);
});
afterAll(async () => {
  await target?.stop();
  await node?.stop();
});

describe('session binding of attestations (real swtpm quotes, qemu-vtpm join service)', () => {
  it('control: the honest node gets a ticket, its document captured on the way', async () => {
    const b = snapshot(target);
    await expectIssued(target, b, await attempt(target.endpoint, honest));
    expect(honest.captured).toHaveLength(1);
  });

  it('an attestation replayed from another connection is refused: extra-data', async () => {
    const recorded = honest.captured[0]?.document as Uint8Array;
    const b = snapshot(target);
    const out = await attempt(target.endpoint, new FixedDocumentIssuer('qemu-vtpm', () => recorded));
    const [audit] = await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'extra-data' });
    expect(audit?.detail).toMatch(/does not match the expected [0-9a-f]{64} \(wrong nonce or user data\)/);
  });

  it('an attestation relayed by a man in the middle between the victim node and the service is refused: extra-data', async () => {
    const relay = await startRelay(target.port);
    try {
      const b = snapshot(target);
      const victim = new GrpcJoinTicketClient({ issuer: node.issuer, clock, defaultTimeoutMs: 10_000 });
      const victimResult = await victim
        .issueJoinTicket(`127.0.0.1:${relay.port}`, await joinRequest('victim-node'))
        .catch((e: unknown) => e);
      const verdict = await relay.verdict;
      expect(verdict).toMatchObject({ type: 0x02, accepted: false, check: 'extra-data' });
      // The victim sees the service's refusal through the relay, and gets nothing either.
      expect(isAttestationError(victimResult) && victimResult.check).toBe('extra-data');
      const audits = await expectAuditedRefusal(target, b, {
        rpc: 'attested-tls',
        reason: 'nonce-mismatch',
        check: 'extra-data',
      });
      expect(audits).toHaveLength(1);
    } finally {
      relay.close();
    }
  });

  it('two connections sharing one TLS identity get different nonces and cannot swap documents: extra-data', async () => {
    // Both connections of this process present the process's one TLS identity (identity-pool.ts).
    const first = new CapturingIssuer(node.issuer);
    const b1 = snapshot(target);
    await expectIssued(target, b1, await attempt(target.endpoint, first));
    const one = first.captured[0];
    if (one === undefined) throw new Error('connection 1 issued nothing');
    // Connection 2: sees its own nonce and the same user data, but sends connection 1's document.
    const seen: Array<{ nonce: Uint8Array; userData: Uint8Array }> = [];
    const swapper = new FixedDocumentIssuer('qemu-vtpm', () => one.document);
    const spy = {
      variant: swapper.variant,
      oid: swapper.oid,
      issue: (userData: Uint8Array, nonce: Uint8Array) => {
        seen.push({ nonce, userData });
        return swapper.issue();
      },
    };
    const b2 = snapshot(target);
    const out = await attempt(target.endpoint, spy);
    await expectRefused(target, b2, out, { code: status.UNAVAILABLE, check: 'extra-data' });
    const two = seen[0];
    if (two === undefined) throw new Error('connection 2 was never asked to attest');
    expect(Buffer.from(two.userData).equals(Buffer.from(one.userData))).toBe(true);
    expect(Buffer.from(two.nonce).equals(Buffer.from(one.nonce))).toBe(false);
  });

  it('user data that does not match the key (a genuine quote over the SHA-256 of another SPKI) is refused: user-data', async () => {
    const other = sha256('SubjectPublicKeyInfo of a TLS key the attacker does not hold');
    const b = snapshot(target);
    const out = await attempt(target.endpoint, new ForeignKeyIssuer(node.issuer, other));
    const [audit] = await expectRefused(target, b, out, { code: status.UNAVAILABLE, check: 'user-data' });
    expect(audit?.detail).toContain(
      "attested user data does not match the SHA-256 of the peer's TLS public key",
    );
  });
});
