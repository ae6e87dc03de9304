/**
 * The attested TLS listener's prepared server TLS (listener.ts, connection.ts) on real loopback TLS
 * with the test-only dummy attestation: setups are prepared once listening, every connection gets a
 * certificate of its own (never one for two connections), and a setup older than five minutes of
 * clock time is discarded instead of used.
 */
import type { X509Certificate } from 'node:crypto';
import { connect as netConnect } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { attestSocket } from '../../../src/adapters/grpc/atls/connection.js';
import { AttestedTlsListener, PREPARED_TLS_MAX_AGE_MS } from '../../../src/adapters/grpc/atls/listener.js';
import type { Clock } from '../../../src/ports/clock.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { clock as systemClock } from './helpers.js';

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
  it('prepares setups once listening and gives every connection its own certificate and key', async () => {
    const { listener, port } = await listen(systemClock);
    await until(() => listener.preparedTls === 4, 'four prepared setups');
    const certs: X509Certificate[] = [];
    for (let i = 0; i < 6; i++) certs.push(await serverCertificate(port));
    expect(new Set(certs.map((c) => c.fingerprint256)).size).toBe(6);
    expect(
      new Set(certs.map((c) => c.publicKey.export({ type: 'spki', format: 'der' }).toString('hex'))).size,
    ).toBe(6);
    await until(() => listener.preparedTls === 4, 'the pool refilled');
  });

  it('discards a setup older than five minutes of clock time and makes a fresh one', async () => {
    const clock = new FakeClock(Date.now());
    const { listener, port } = await listen(clock);
    await until(() => listener.preparedTls === 4, 'four prepared setups');
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
