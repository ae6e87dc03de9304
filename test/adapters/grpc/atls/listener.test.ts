/**
 * The attested TLS listener's server TLS (listener.ts, connection.ts, identity-pool.ts) on real
 * loopback TLS with the test-only dummy attestation: the setup is looked up once listening, every
 * connection presents the process's one certificate (concurrent handshakes share one tls.Server),
 * and after a clock jump the next connection presents a new certificate valid at the new "now".
 */
import type { X509Certificate } from 'node:crypto';
import { connect as netConnect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { attestSocket } from '../../../../src/adapters/grpc/atls/connection.js';
import { AttestedTlsListener, PREPARED_TLS_MAX_AGE_MS } from '../../../../src/adapters/grpc/atls/listener.js';
import type { Clock } from '../../../../src/ports/clock.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { DummyIssuer, DummyValidator } from '../../../support/dummy-attestation.js';
import { clock as systemClock } from '../helpers.js';

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

async function listen(clock: Clock) {
  const listener = new AttestedTlsListener({ validators: [new DummyValidator()], clock }, (socket) =>
    cleanups.push(() => socket.destroy()),
  );
  const port = await listener.listen('127.0.0.1', 0);
  cleanups.push(() => listener.close());
  return { listener, port };
}

/** Attests one client connection and returns the server certificate it saw. */
async function serverCertificate(port: number): Promise<X509Certificate> {
  const raw = netConnect(port, '127.0.0.1');
  raw.on('error', () => {});
  cleanups.push(() => raw.destroy());
  await new Promise<void>((r) => raw.once('connect', () => r()));
  const { socket } = await attestSocket(raw, 'client', { issuer: new DummyIssuer(), clock: systemClock });
  cleanups.push(() => socket.destroy());
  const cert = socket.getPeerX509Certificate();
  if (cert === undefined) throw new Error('no server certificate');
  return cert;
}

describe('AttestedTlsListener prepared server TLS', () => {
  it('looks the setup up once listening and presents one certificate on every connection, also concurrent ones', async () => {
    const { listener, port } = await listen(systemClock);
    await until(() => listener.preparedTls === 1, 'the setup looked up');
    const certs: X509Certificate[] = [];
    for (let i = 0; i < 3; i++) certs.push(await serverCertificate(port));
    certs.push(...(await Promise.all([1, 2, 3, 4, 5, 6].map(() => serverCertificate(port)))));
    expect(certs).toHaveLength(9);
    expect(new Set(certs.map((c) => c.fingerprint256)).size).toBe(1);
    await until(() => listener.preparedTls === 1, 'the lookup made again');
  });

  it('after a clock jump the next connection presents a fresh certificate valid at the new time', async () => {
    const clock = new FakeClock(Date.now());
    const { listener, port } = await listen(clock);
    await until(() => listener.preparedTls === 1, 'the setup looked up');
    await clock.advance(PREPARED_TLS_MAX_AGE_MS + 1_000);
    const cert = await serverCertificate(port);
    // Valid from now - 2 h of the advanced clock: made after the advance, not taken from the pool.
    expect(Date.parse(cert.validFrom)).toBeGreaterThanOrEqual(
      Math.floor((clock.now().getTime() - 2 * 60 * 60 * 1000) / 1000) * 1000,
    );
  });

  it('prepares nothing with preparedTls 0 and still attests', async () => {
    const listener = new AttestedTlsListener(
      { validators: [new DummyValidator()], clock: systemClock, preparedTls: 0 },
      (socket) => cleanups.push(() => socket.destroy()),
    );
    const port = await listener.listen('127.0.0.1', 0);
    cleanups.push(() => listener.close());
    await serverCertificate(port);
    expect(listener.preparedTls).toBe(0);
  });
});
