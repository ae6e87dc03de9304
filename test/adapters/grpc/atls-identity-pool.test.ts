/**
 * One-use client TLS identities prepared ahead (atls/identity-pool.ts) and their use by the join
 * client: real key and certificate generation, real grpc-js and attested TLS on loopback with the
 * test-only dummy attestation. Every connection gets an identity of its own (never one for two
 * connections), and an identity older than five minutes of clock time is discarded unused.
 */
import { X509Certificate } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import {
  PREPARED_IDENTITY_MAX_AGE_MS,
  TlsIdentityPool,
} from '../../../src/adapters/grpc/atls/identity-pool.js';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { GrpcJoinTicketClient } from '../../../src/adapters/grpc/join-client.js';
import { createJoinServer } from '../../../src/adapters/grpc/join-server.js';
import type { JoinTicketRequest } from '../../../src/ports/types.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { sampleTicket, clock as systemClock } from './helpers.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function until(cond: () => boolean, what: string, maxMs = 10_000): Promise<void> {
  const end = Date.now() + maxMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

describe('TlsIdentityPool', () => {
  it('fills in the background, hands every identity out once, and refills', async () => {
    const pool = new TlsIdentityPool({ clock: systemClock, size: 2 });
    cleanups.push(() => pool.close());
    await until(() => pool.available === 2, 'two prepared identities');
    const taken = [];
    for (let i = 0; i < 5; i++) {
      await until(() => pool.available > 0, 'a prepared identity');
      const id = pool.take();
      if (id === undefined) throw new Error('no identity although one was available');
      taken.push(id);
    }
    expect(new Set(taken.map((t) => hex(t.spkiHash))).size).toBe(5);
    expect(new Set(taken.map((t) => t.keyPem)).size).toBe(5);
    for (const t of taken) expect(new X509Certificate(t.certPem).subject).toBe('CN=Constellation');
    await until(() => pool.available === 2, 'the pool refilled');
  });

  it('discards identities older than five minutes of clock time', async () => {
    const clock = new FakeClock(Date.now());
    const pool = new TlsIdentityPool({ clock, size: 2 });
    cleanups.push(() => pool.close());
    await until(() => pool.available === 2, 'two prepared identities');
    await clock.advance(PREPARED_IDENTITY_MAX_AGE_MS + 1_000);
    expect(pool.take()).toBeUndefined();
    const fresh = await pool.takeOrCreate();
    // Valid from now - 2 h of the advanced clock: made after the advance.
    expect(Date.parse(new X509Certificate(fresh.certPem).validFrom)).toBeGreaterThanOrEqual(
      Math.floor((clock.now().getTime() - 2 * 60 * 60 * 1000) / 1000) * 1000,
    );
  });

  it('prepares nothing with size 0, and nothing more once closed', async () => {
    let made = 0;
    const create = async () => {
      made++;
      return { keyPem: '', certPem: '', spkiHash: new Uint8Array(32) };
    };
    const empty = new TlsIdentityPool({ clock: systemClock, size: 0, create });
    expect(empty.take()).toBeUndefined();
    const pool = new TlsIdentityPool({ clock: systemClock, size: 3, create });
    await until(() => pool.available === 3, 'three prepared identities');
    pool.close();
    expect(pool.take()).toBeUndefined();
    await new Promise((r) => setTimeout(r, 20));
    expect([made, pool.available]).toEqual([3, 0]);
    expect(() => new TlsIdentityPool({ clock: systemClock, size: -1 })).toThrow(/integer ≥ 0/);
  });
});

describe('GrpcJoinTicketClient with prepared identities', () => {
  const request: JoinTicketRequest = {
    diskUuid: 'c0ffee00-0000-4000-8000-000000000001',
    certificateRequest: new Uint8Array([0x30, 0x82, 0x01]),
    isControlPlane: false,
    hostPublicKey: new Uint8Array(0),
    hostCertificatePrincipals: [],
  };

  async function start() {
    const userData: string[] = [];
    const server: AttestedGrpcServer = createJoinServer({
      validators: [new DummyValidator()],
      clock: systemClock,
      handler: {
        async issueJoinTicket(_r, ctx) {
          userData.push(hex(ctx.attestation.userData));
          return sampleTicket();
        },
        async issueRejoinTicket() {
          throw new Error('not used');
        },
      },
    });
    cleanups.push(() => server.shutdown(200));
    const port = await server.listen('127.0.0.1', 0);
    return { endpoint: `127.0.0.1:${port}`, userData };
  }

  it.each([
    ['one prepared identity (default)', undefined],
    ['none prepared', 0],
  ])('%s: every call attests a certificate key of its own', async (_name, preparedIdentities) => {
    const { endpoint, userData } = await start();
    const client = new GrpcJoinTicketClient({
      issuer: new DummyIssuer(),
      clock: systemClock,
      ...(preparedIdentities !== undefined ? { preparedIdentities } : {}),
    });
    for (let i = 0; i < 4; i++) await client.issueJoinTicket(endpoint, request);
    expect(userData).toHaveLength(4);
    expect(new Set(userData).size).toBe(4);
  });

  it('refuses a negative number of prepared identities', () => {
    expect(
      () =>
        new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock: systemClock, preparedIdentities: -1 }),
    ).toThrow(/preparedIdentities/);
  });
});
