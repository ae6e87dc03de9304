/**
 * verifyPeerAttestation on a real self-signed aTLS certificate and the test-only dummy attestation:
 * each check in order, and a refusal names the failed check after the checks that passed.
 */
import { X509Certificate } from 'node:crypto';
import type { TLSSocket } from 'node:tls';
import { beforeAll, describe, expect, it } from 'vitest';
import { createTlsIdentity, type TlsIdentity } from '../../../../src/adapters/grpc/atls/certificate.js';
import { verifyPeerAttestation } from '../../../../src/adapters/grpc/atls/peer-attestation.js';
import { type AttestationFrame, FRAME_ATTESTATION } from '../../../../src/adapters/grpc/atls/protocol.js';
import { SystemClock } from '../../../../src/adapters/system/system-clock.js';
import { isAttestationError } from '../../../../src/ports/errors.js';
import { DummyIssuer, DummyValidator } from '../../../support/dummy-attestation.js';
import { RefusingValidator } from '../helpers.js';

const clock = new SystemClock();
const nonce = new Uint8Array(32).fill(3);
let identity: TlsIdentity;
let socket: TLSSocket;

beforeAll(async () => {
  identity = await createTlsIdentity(clock);
  const cert = new X509Certificate(identity.certPem);
  // Only the peer certificate is read from the socket.
  socket = { getPeerX509Certificate: () => cert } as unknown as TLSSocket;
});

const attestation = (oid: string, document: Uint8Array): AttestationFrame => ({
  type: FRAME_ATTESTATION,
  oid,
  document,
});

async function frame(userData = identity.spkiHash) {
  const issuer = new DummyIssuer();
  return attestation(issuer.oid, await issuer.issue(userData, nonce));
}

async function refusal(p: Promise<unknown>): Promise<{ check: string; names: string[] }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isAttestationError(err)) throw new Error(`expected an attestation error, got ${String(err)}`);
  return { check: err.check, names: err.checks.map((c) => c.name) };
}

describe('verifyPeerAttestation', () => {
  it('accepts a document bound to the peer TLS key and lists every check in order', async () => {
    const f = await frame();
    const peer = await verifyPeerAttestation(f, socket, nonce, [new DummyValidator()], clock, {});
    expect(peer.variant).toBe('dummy');
    expect(peer.userData).toEqual(identity.spkiHash);
    expect(peer.nonce).toEqual(nonce);
    expect(peer.document).toEqual(f.document);
    const names = peer.checks.map((c) => c.name);
    expect(names[0]).toBe('peer-certificate');
    expect(names[1]).toBe('variant-oid');
    expect(names.at(-1)).toBe('user-data');
  });

  it('user data of another key is refused (user-data)', async () => {
    const f = await frame(new Uint8Array(32).fill(7));
    expect(
      (await refusal(verifyPeerAttestation(f, socket, nonce, [new DummyValidator()], clock, {}))).check,
    ).toBe('user-data');
  });

  it('no attestation where one is required is refused (attestation-missing)', async () => {
    const r = await refusal(
      verifyPeerAttestation(
        attestation('', new Uint8Array()),
        socket,
        nonce,
        [new DummyValidator()],
        clock,
        {},
      ),
    );
    expect(r).toEqual({ check: 'attestation-missing', names: ['peer-certificate', 'attestation-missing'] });
  });

  it('an OID no validator accepts is refused (unknown-oid), named through the registry when it can be', async () => {
    const err = await verifyPeerAttestation(
      attestation('1.2.3.4', new Uint8Array()),
      socket,
      nonce,
      [new DummyValidator()],
      clock,
      {},
      (oid) => (oid === '1.2.3.4' ? 'some-variant' : undefined),
    ).catch((e: unknown) => e);
    expect(isAttestationError(err) && err.check).toBe('unknown-oid');
    expect((err as Error).message).toMatch(/1\.2\.3\.4 \(some-variant\) is not accepted; accepted: dummy/);
  });

  it("a validator's refusal keeps its check and is prefixed with the variant", async () => {
    const err = await verifyPeerAttestation(
      await frame(),
      socket,
      nonce,
      [new RefusingValidator()],
      clock,
      {},
    ).catch((e: unknown) => e);
    expect(isAttestationError(err) && err.check).toBe('pcr-values');
    expect((err as Error).message).toMatch(/^dummy attestation: untrusted measurement/);
  });

  it('a peer certificate outside its validity is refused before any validator runs', async () => {
    const late = { now: () => new Date(Date.now() + 24 * 3600_000) } as SystemClock;
    const r = await refusal(
      verifyPeerAttestation(await frame(), socket, nonce, [new DummyValidator()], late, {}),
    );
    expect(r.names).toEqual([r.check]);
  });
});
