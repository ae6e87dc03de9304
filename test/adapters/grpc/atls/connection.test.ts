/**
 * Attested TLS modes over real TLS 1.3 sockets on 127.0.0.1 (upstream atls_test.go case names):
 * client→server (join), server→client (init), mutual, multiple validators, validate errors,
 * unknown OIDs, missing attestation, expired certificates, issuer failure, concurrency.
 */
import { describe, expect, it } from 'vitest';
import { variantOfOid } from '../../../../src/app/registry/index.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { DummyIssuer, DummyValidator } from '../../../support/dummy-attestation.js';
import {
  attestPair,
  checkOf,
  clock,
  FailingIssuer,
  RefusingValidator,
  WrongUserDataIssuer,
} from '../helpers.js';

function ok<T>(r: PromiseSettledResult<T>): T {
  if (r.status === 'rejected') throw new Error(`expected success, got: ${(r.reason as Error).message}`);
  return r.value;
}

describe('client->server (join: the node attests)', () => {
  it('basic', async () => {
    const { server, client } = await attestPair(
      { clock, validators: [new DummyValidator()] },
      { clock, issuer: new DummyIssuer() },
    );
    const peer = ok(server).peer;
    expect(peer.attestation?.variant).toBe('dummy');
    expect(peer.attestation?.checks.map((c) => c.name)).toEqual([
      'peer-certificate',
      'variant-oid',
      'nonce',
      'user-data',
    ]);
    expect(peer.address).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(ok(client).peer.attestation).toBeUndefined();
  });

  it('the attested user data is the SHA-256 of the client certificate SPKI, and the nonce is the exporter', async () => {
    const v = new DummyValidator();
    const srv = await attestPair({ clock, validators: [v] }, { clock, issuer: new DummyIssuer() });
    const peer = ok(srv.server).peer;
    expect(peer.attestation?.userData).toHaveLength(32);
    expect(v.calls).toHaveLength(1);
    expect(v.calls[0]?.nonce).toHaveLength(32);
    // One TLS identity per process and end: two connections bind the same key, each its own nonce.
    const again = await attestPair({ clock, validators: [v] }, { clock, issuer: new DummyIssuer() });
    expect(
      Buffer.from(ok(again.server).peer.attestation?.userData ?? []).equals(
        Buffer.from(peer.attestation?.userData ?? []),
      ),
    ).toBe(true);
    expect(Buffer.from(v.calls[1]?.nonce ?? []).equals(Buffer.from(v.calls[0]?.nonce ?? []))).toBe(false);
  });

  it('multiple validators: the one matching the OID validates', async () => {
    const qemu = new DummyValidator('qemu-vtpm');
    const dummy = new DummyValidator();
    const { server } = await attestPair(
      { clock, validators: [qemu, dummy] },
      { clock, issuer: new DummyIssuer('qemu-vtpm') },
    );
    expect(ok(server).peer.attestation?.variant).toBe('qemu-vtpm');
    expect(qemu.calls).toHaveLength(1);
    expect(dummy.calls).toHaveLength(0);
  });

  it('validate error: both ends fail, naming the check', async () => {
    const { server, client } = await attestPair(
      { clock, validators: [new RefusingValidator()] },
      { clock, issuer: new DummyIssuer() },
    );
    expect(checkOf(server)).toBe('pcr-values');
    expect(checkOf(client)).toBe('pcr-values');
    // The refusing side keeps the detail; the refused peer learns the check only.
    expect((server as PromiseRejectedResult).reason.message).toContain(
      'untrusted measurement value 00 at index 4',
    );
    expect((client as PromiseRejectedResult).reason.message).toBe(
      'refused by the peer (check pcr-values): pcr-values',
    );
  });

  it('unknown oid is refused, naming its variant through the registry lookup the composition injects', async () => {
    const { server, client } = await attestPair(
      { clock, validators: [new DummyValidator()], variantOfOid },
      { clock, issuer: new DummyIssuer('azure-tdx') },
    );
    expect(checkOf(server)).toBe('unknown-oid');
    expect((server as PromiseRejectedResult).reason.message).toContain(
      '1.3.9900.4.3 (azure-tdx) is not accepted',
    );
    expect(checkOf(client)).toBe('unknown-oid');
  });

  it('unknown oid is refused without a lookup too, naming the OID alone', async () => {
    const { server } = await attestPair(
      { clock, validators: [new DummyValidator()] },
      { clock, issuer: new DummyIssuer('azure-tdx') },
    );
    expect(checkOf(server)).toBe('unknown-oid');
    expect((server as PromiseRejectedResult).reason.message).toContain(
      'attestation variant OID 1.3.9900.4.3 is not accepted',
    );
  });

  it('client cert is not verified by a server without validators', async () => {
    const { server, client } = await attestPair({ clock }, { clock, issuer: new DummyIssuer() });
    expect(ok(server).peer.attestation).toBeUndefined();
    expect(ok(client).peer.attestation).toBeUndefined();
  });

  it('user data that does not match the TLS key is refused', async () => {
    const { server } = await attestPair(
      { clock, validators: [new DummyValidator()] },
      { clock, issuer: new WrongUserDataIssuer() },
    );
    expect(checkOf(server)).toBe('user-data');
  });

  it('an expired client certificate is refused', async () => {
    const past = new FakeClock(Date.now() - 3 * 60 * 60 * 1000);
    const { server } = await attestPair(
      { clock, validators: [new DummyValidator()] },
      { clock: past, issuer: new DummyIssuer() },
    );
    expect(checkOf(server)).toBe('peer-certificate');
    expect((server as PromiseRejectedResult).reason.message).toContain('not valid at');
  });

  it('an issuer failure aborts the connection at both ends: the detail at the failing end, the check at the other', async () => {
    const { server, client } = await attestPair(
      { clock, validators: [new DummyValidator()] },
      { clock, issuer: new FailingIssuer() },
    );
    expect((client as PromiseRejectedResult).reason.message).toContain(
      'issuing dummy attestation: TPM quote failed',
    );
    expect(checkOf(server)).toBe('issuer');
    expect((server as PromiseRejectedResult).reason.message).toBe(
      'refused by the peer (check issuer): issuer',
    );
  });
});

describe('server->client (init: the node attests to confboot init)', () => {
  it('basic', async () => {
    const { server, client } = await attestPair(
      { clock, issuer: new DummyIssuer() },
      { clock, validators: [new DummyValidator()] },
    );
    expect(ok(client).peer.attestation?.variant).toBe('dummy');
    expect(ok(server).peer.attestation).toBeUndefined();
  });

  it('multiple validators', async () => {
    const gcp = new DummyValidator('gcp-sev-es');
    const { client } = await attestPair(
      { clock, issuer: new DummyIssuer('gcp-sev-es') },
      { clock, validators: [new DummyValidator(), gcp] },
    );
    expect(ok(client).peer.attestation?.variant).toBe('gcp-sev-es');
  });

  it('validate error', async () => {
    const { server, client } = await attestPair(
      { clock, issuer: new DummyIssuer() },
      { clock, validators: [new RefusingValidator()] },
    );
    expect(checkOf(client)).toBe('pcr-values');
    expect(checkOf(server)).toBe('pcr-values');
  });

  it('unknown oid', async () => {
    const { client } = await attestPair(
      { clock, issuer: new DummyIssuer('qemu-tdx') },
      { clock, validators: [new DummyValidator()] },
    );
    expect(checkOf(client)).toBe('unknown-oid');
  });
});

describe('mutual', () => {
  it('basic', async () => {
    const { server, client } = await attestPair(
      { clock, issuer: new DummyIssuer(), validators: [new DummyValidator()] },
      { clock, issuer: new DummyIssuer(), validators: [new DummyValidator()] },
    );
    expect(ok(server).peer.attestation?.variant).toBe('dummy');
    expect(ok(client).peer.attestation?.variant).toBe('dummy');
    expect(
      Buffer.from(ok(server).peer.attestation?.userData ?? []).equals(
        Buffer.from(ok(client).peer.attestation?.userData ?? []),
      ),
    ).toBe(false);
  });

  it('multiple validators', async () => {
    const { server, client } = await attestPair(
      {
        clock,
        issuer: new DummyIssuer('aws-nitro-tpm'),
        validators: [new DummyValidator('qemu-vtpm'), new DummyValidator()],
      },
      { clock, issuer: new DummyIssuer('qemu-vtpm'), validators: [new DummyValidator('aws-nitro-tpm')] },
    );
    expect(ok(server).peer.attestation?.variant).toBe('qemu-vtpm');
    expect(ok(client).peer.attestation?.variant).toBe('aws-nitro-tpm');
  });

  it('fails if client sends no attestation', async () => {
    const { server, client } = await attestPair(
      { clock, issuer: new DummyIssuer(), validators: [new DummyValidator()] },
      { clock, validators: [new DummyValidator()] },
    );
    expect(checkOf(server)).toBe('attestation-missing');
    expect(checkOf(client)).toBe('attestation-missing');
  });

  it('fails if server sends no attestation', async () => {
    const { server, client } = await attestPair(
      { clock, validators: [new DummyValidator()] },
      { clock, issuer: new DummyIssuer(), validators: [new DummyValidator()] },
    );
    expect(checkOf(client)).toBe('attestation-missing');
    expect(checkOf(server)).toBe('attestation-missing');
  });

  it('validate error client side', async () => {
    const { client, server } = await attestPair(
      { clock, issuer: new DummyIssuer(), validators: [new DummyValidator()] },
      { clock, issuer: new DummyIssuer(), validators: [new RefusingValidator()] },
    );
    expect(checkOf(client)).toBe('pcr-values');
    expect(server.status).toBe('rejected');
  });

  it('validate error server side', async () => {
    const { client, server } = await attestPair(
      { clock, issuer: new DummyIssuer(), validators: [new RefusingValidator()] },
      { clock, issuer: new DummyIssuer(), validators: [new DummyValidator()] },
    );
    expect(checkOf(server)).toBe('pcr-values');
    expect(client.status).toBe('rejected');
  });

  it('unknown oid from client', async () => {
    const { server } = await attestPair(
      { clock, issuer: new DummyIssuer(), validators: [new DummyValidator()] },
      { clock, issuer: new DummyIssuer('azure-sev-snp'), validators: [new DummyValidator()] },
    );
    expect(checkOf(server)).toBe('unknown-oid');
  });

  it('unknown oid from server', async () => {
    const { client } = await attestPair(
      { clock, issuer: new DummyIssuer('azure-sev-snp'), validators: [new DummyValidator()] },
      { clock, issuer: new DummyIssuer(), validators: [new DummyValidator()] },
    );
    expect(checkOf(client)).toBe('unknown-oid');
  });
});

describe('concurrency', () => {
  it('many connections at once each attest their own session', async () => {
    const v = new DummyValidator();
    const results = await Promise.all(
      Array.from({ length: 12 }, () =>
        attestPair({ clock, validators: [v] }, { clock, issuer: new DummyIssuer() }),
      ),
    );
    for (const r of results) expect(ok(r.server).peer.attestation?.variant).toBe('dummy');
    const nonces = new Set(v.calls.map((c) => Buffer.from(c.nonce).toString('hex')));
    expect(nonces.size).toBe(12);
  });
});
