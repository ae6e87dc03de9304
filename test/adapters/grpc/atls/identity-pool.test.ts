/**
 * The process's attested TLS identity (atls/identity-pool.ts) and its use by both ends: real key
 * and certificate generation, real loopback TLS, grpc-js and the test-only dummy attestation. One
 * identity serves every connection until it is due (schedule) or the clock jumps; concurrent
 * first uses make one identity; the shared tls.Server never resumes a session.
 */
import { X509Certificate } from 'node:crypto';
import { createServer as createNetServer, type Server, type Socket } from 'node:net';
import { type TLSSocket, connect as tlsConnect } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import type { TlsIdentity } from '../../../../src/adapters/grpc/atls/certificate.js';
import { createTlsIdentity } from '../../../../src/adapters/grpc/atls/certificate.js';
import {
  CLOCK_JUMP_TOLERANCE_MS,
  processTlsIdentity,
  RotatingTlsIdentity,
} from '../../../../src/adapters/grpc/atls/identity-pool.js';
import type { AttestedGrpcServer } from '../../../../src/adapters/grpc/attested-server.js';
import { GrpcJoinTicketClient } from '../../../../src/adapters/grpc/join-client.js';
import { createJoinServer } from '../../../../src/adapters/grpc/join-server.js';
import type { Clock } from '../../../../src/ports/clock.js';
import type { JoinTicketRequest } from '../../../../src/ports/types.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { DummyIssuer, DummyValidator } from '../../../support/dummy-attestation.js';
import { joinCallOf } from '../../../support/join-call.js';
import { sampleTicket, clock as systemClock } from '../helpers.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** A create() that counts and delegates to the real one. */
function counting() {
  const made = { count: 0 };
  const create = async (clock: Clock): Promise<TlsIdentity> => {
    made.count++;
    return createTlsIdentity(clock);
  };
  return { made, create };
}

describe('RotatingTlsIdentity', () => {
  it('serves one identity to every caller; concurrent first uses make it once', async () => {
    const { made, create } = counting();
    const holder = new RotatingTlsIdentity({ clock: systemClock, create });
    const all = await Promise.all([holder.get(), holder.get(), holder.get()]);
    const again = await holder.get();
    expect(made.count).toBe(1);
    expect(new Set([...all, again].map((i) => hex(i.spkiHash))).size).toBe(1);
    expect(again.generation).toBe(1);
    expect(new X509Certificate(again.certPem).subject).toBe('CN=Constellation');
    const a = await holder.server(true, 5_000);
    const b = await holder.server(true, 5_000);
    const c = await holder.server(false, 5_000);
    expect(a.server).toBe(b.server);
    expect(c.server).not.toBe(a.server);
  });

  it('rotates on schedule', async () => {
    const { made, create } = counting();
    const holder = new RotatingTlsIdentity({ clock: systemClock, rotateEveryMs: 40, create });
    const first = await holder.get();
    await new Promise((r) => setTimeout(r, 60));
    const second = await holder.get();
    expect(made.count).toBe(2);
    expect(second.generation).toBe(2);
    expect(hex(second.spkiHash)).not.toBe(hex(first.spkiHash));
  });

  it('rotates at once when the clock jumps, not for a step within the tolerance', async () => {
    const clock = new FakeClock(Date.now());
    const { made, create } = counting();
    const holder = new RotatingTlsIdentity({ clock, create });
    const first = await holder.get();
    await clock.advance(CLOCK_JUMP_TOLERANCE_MS / 2);
    expect(hex((await holder.get()).spkiHash)).toBe(hex(first.spkiHash));
    await clock.advance(3 * 60 * 60_000);
    const after = await holder.get();
    expect(made.count).toBe(2);
    expect(hex(after.spkiHash)).not.toBe(hex(first.spkiHash));
    // Its certificate is valid around the jumped clock's "now".
    const cert = new X509Certificate(after.certPem);
    const now = clock.now().getTime();
    expect(Date.parse(cert.validFrom) <= now && now <= Date.parse(cert.validTo)).toBe(true);
  });

  it('is one per end and clock object in a process', () => {
    const other = new FakeClock();
    expect(processTlsIdentity(systemClock, 'client')).toBe(processTlsIdentity(systemClock, 'client'));
    expect(processTlsIdentity(systemClock, 'server')).not.toBe(processTlsIdentity(systemClock, 'client'));
    expect(processTlsIdentity(other, 'client')).not.toBe(processTlsIdentity(systemClock, 'client'));
    expect(() => new RotatingTlsIdentity({ clock: systemClock, rotateEveryMs: 0 })).toThrow(/positive/);
  });

  it('the shared tls.Server runs concurrent handshakes and never resumes a session', async () => {
    const holder = new RotatingTlsIdentity({ clock: systemClock });
    const { server } = await holder.server(false, 5_000);
    const accepted: TLSSocket[] = [];
    const tcp: Server = createNetServer((raw: Socket) => {
      raw.on('error', () => {});
      server.handshake(raw).done.then(
        (s) => {
          accepted.push(s);
          s.end('x');
        },
        () => raw.destroy(),
      );
    });
    cleanups.push(() => new Promise((r) => tcp.close(r)));
    await new Promise<void>((r) => tcp.listen(0, '127.0.0.1', r));
    const port = (tcp.address() as { port: number }).port;
    let session: Buffer | undefined;
    const connectOnce = () =>
      new Promise<boolean>((resolve, reject) => {
        const c = tlsConnect({
          port,
          host: '127.0.0.1',
          rejectUnauthorized: false,
          ALPNProtocols: ['h2'],
          minVersion: 'TLSv1.3',
          ...(session ? { session } : {}),
        });
        c.on('session', (s: Buffer) => {
          session = s;
        });
        c.on('error', reject);
        c.on('data', () => {});
        c.on('end', () => {
          const reused = c.isSessionReused();
          c.end();
          resolve(reused);
        });
      });
    // Five at once through one tls.Server, then two that offer the session of an earlier one.
    expect(await Promise.all([1, 2, 3, 4, 5].map(() => connectOnce()))).toEqual([
      false,
      false,
      false,
      false,
      false,
    ]);
    expect(session).toBeDefined();
    expect(await connectOnce()).toBe(false);
    expect(await connectOnce()).toBe(false);
    expect(accepted).toHaveLength(7);
    expect(accepted.some((s) => s.isSessionReused())).toBe(false);
    expect(server.inProgress).toBe(0);
  });
});

describe('GrpcJoinTicketClient with the process identity', () => {
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
      joinCall: joinCallOf({
        async issueJoinTicket(_r, ctx) {
          userData.push(hex(ctx.attestation.userData));
          return sampleTicket();
        },
        async issueRejoinTicket() {
          throw new Error('not used');
        },
      }),
    });
    cleanups.push(() => server.shutdown(200));
    const port = await server.listen('127.0.0.1', 0);
    return { endpoint: `127.0.0.1:${port}`, userData };
  }

  it('every call presents the same TLS key, and every call gets its own nonce', async () => {
    const { endpoint, userData } = await start();
    const nonces: string[] = [];
    const issuer = new DummyIssuer();
    const recording = {
      variant: issuer.variant,
      oid: issuer.oid,
      issue: (u: Uint8Array, n: Uint8Array) => {
        nonces.push(hex(n));
        return issuer.issue(u, n);
      },
    };
    const client = new GrpcJoinTicketClient({ issuer: recording, clock: systemClock });
    for (let i = 0; i < 4; i++) await client.issueJoinTicket(endpoint, request);
    expect(userData).toHaveLength(4);
    expect(new Set(userData).size).toBe(1);
    expect(userData[0]).toBe(hex((await processTlsIdentity(systemClock, 'client').get()).spkiHash));
    expect(new Set(nonces).size).toBe(4);
  });
});
