/**
 * The attested TLS listener's handshake admission (listener.ts) on real loopback TLS with the
 * test-only dummy attestation: beyond `maxConcurrentHandshakes` connections wait in FIFO order and
 * all of them attest; a connection its client closed while waiting is dropped; one that waited
 * longer than the handshake timeout is dropped without a handshake.
 */
import { connect as netConnect, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { attestSocket } from '../../../src/adapters/grpc/atls/connection.js';
import { AttestedTlsListener } from '../../../src/adapters/grpc/atls/listener.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { clock } from './helpers.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function until(cond: () => boolean, what: string, maxMs = 5_000): Promise<void> {
  const end = Date.now() + maxMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

async function rawConnect(port: number): Promise<Socket> {
  const raw = netConnect(port, '127.0.0.1');
  raw.on('error', () => {});
  cleanups.push(() => raw.destroy());
  await new Promise<void>((r) => raw.once('connect', () => r()));
  return raw;
}

async function start(options: { maxConcurrentHandshakes: number; handshakeTimeoutMs?: number }) {
  const attested: TLSSocket[] = [];
  const warnings: Array<{ message: string; fields: Record<string, unknown> | undefined }> = [];
  const logger = {
    debug() {},
    info() {},
    error() {},
    warn(message: string, fields?: Record<string, unknown>) {
      warnings.push({ message, fields });
    },
    child() {
      return logger;
    },
  };
  const listener = new AttestedTlsListener(
    { validators: [new DummyValidator()], clock, logger: logger as never, ...options },
    (socket) => {
      attested.push(socket);
      cleanups.push(() => socket.destroy());
    },
  );
  const port = await listener.listen('127.0.0.1', 0);
  cleanups.push(() => listener.close());
  return { listener, port, attested, warnings };
}

describe('AttestedTlsListener handshake admission', () => {
  it('runs at most maxConcurrentHandshakes at once; the others wait their turn and all attest', async () => {
    const { listener, port, attested } = await start({ maxConcurrentHandshakes: 1 });
    const raws = await Promise.all(Array.from({ length: 4 }, () => rawConnect(port)));
    await until(() => listener.pendingHandshakes === 4, 'four accepted connections');
    expect(listener.queuedHandshakes).toBe(3);
    const clients = await Promise.all(
      raws.map((raw) => attestSocket(raw, 'client', { issuer: new DummyIssuer(), clock })),
    );
    for (const c of clients) cleanups.push(() => c.socket.destroy());
    await until(() => attested.length === 4, 'four attested connections');
    expect([listener.pendingHandshakes, listener.queuedHandshakes]).toEqual([0, 0]);
  });

  it('drops a waiting connection its client closed, and still serves the next one', async () => {
    const { listener, port, attested } = await start({ maxConcurrentHandshakes: 1 });
    const first = await rawConnect(port);
    const quitter = await rawConnect(port);
    const third = await rawConnect(port);
    await until(() => listener.queuedHandshakes === 2, 'two waiting connections');
    quitter.destroy();
    await until(() => listener.pendingHandshakes === 2, 'the closed connection to leave');
    const clients = await Promise.all(
      [first, third].map((raw) => attestSocket(raw, 'client', { issuer: new DummyIssuer(), clock })),
    );
    for (const c of clients) cleanups.push(() => c.socket.destroy());
    await until(() => attested.length === 2, 'two attested connections');
    expect(listener.pendingHandshakes).toBe(0);
  });

  it('drops a connection that waited longer than the handshake timeout without starting its handshake', async () => {
    const { listener, port, warnings } = await start({ maxConcurrentHandshakes: 1, handshakeTimeoutMs: 300 });
    // Three silent clients: the first holds the slot for 300 ms; the second arrives 150 ms later,
    // so it has waited ~150 ms when it gets the slot and holds it 300 ms more; by then the third
    // has waited ~450 ms > 300 ms.
    const first = await rawConnect(port);
    await new Promise((r) => setTimeout(r, 150));
    const silent = [first, await rawConnect(port), await rawConnect(port)];
    const closed = silent.map((s) => new Promise<void>((r) => s.once('close', () => r())));
    await Promise.all(closed);
    await until(() => listener.pendingHandshakes === 0, 'no pending connections');
    expect(warnings.filter((w) => w.message.startsWith('Refused attested TLS connection'))).toHaveLength(2);
    const dropped = warnings.filter((w) => w.message.includes('waited too long'));
    expect(dropped).toHaveLength(1);
    expect(dropped[0]?.fields?.waitedMs).toBeGreaterThan(300);
  });

  it('refuses a negative or fractional limit', () => {
    expect(
      () => new AttestedTlsListener({ clock, validators: [], maxConcurrentHandshakes: -1 }, () => {}),
    ).toThrow(/maxConcurrentHandshakes/);
    expect(
      () => new AttestedTlsListener({ clock, validators: [], maxConcurrentHandshakes: 0.5 }, () => {}),
    ).toThrow(/maxConcurrentHandshakes/);
  });
});
