/**
 * Attested TLS admission (admission.ts, run by listener.ts) on real loopback TLS with the test-only
 * dummy attestation: the cap on TLS handshakes in progress, and the phase deadlines that need a
 * hand-made client: the ATTESTATION frame's bytes-per-second floor and the VERDICT deadline.
 * Deadline cases assert which reason a connection was dropped or refused with, never when.
 */
import { createHash } from 'node:crypto';
import { type AddressInfo, connect, createServer } from 'node:net';
import { type TLSSocket, connect as tlsConnect } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import type { DropReason } from '../../../../src/adapters/grpc/atls/admission-drop.js';
import { exporterNonce } from '../../../../src/adapters/grpc/atls/exchange.js';
import { AttestedTlsListener } from '../../../../src/adapters/grpc/atls/listener.js';
import {
  encodeAttestationFrame,
  FRAME_ATTESTATION,
  FRAME_HEADER_BYTES,
} from '../../../../src/adapters/grpc/atls/protocol.js';
import { DummyIssuer, DummyValidator } from '../../../support/dummy-attestation.js';
import { rawTlsClient } from '../../../support/raw-atls-client.js';
import { clock } from '../helpers.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function listen(deadlines: Record<string, number>, settings: { maxHandshakes?: number } = {}) {
  const dropped: DropReason[] = [];
  const refused: Error[] = [];
  const listener = new AttestedTlsListener(
    { validators: [new DummyValidator()], clock, deadlines, ...settings },
    (socket) => cleanups.push(() => socket.destroy()),
  );
  listener.onDropped = (_a, reason) => dropped.push(reason);
  listener.onRefused = (_a, reason) => refused.push(reason);
  const port = await listener.listen('127.0.0.1', 0);
  cleanups.push(() => listener.close());
  return { port, dropped, refused, listener };
}

async function until(cond: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function spkiHash(socket: TLSSocket): Uint8Array {
  const cert = socket.getX509Certificate();
  if (cert === undefined) throw new Error('no local certificate');
  return new Uint8Array(
    createHash('sha256')
      .update(cert.publicKey.export({ type: 'spki', format: 'der' }))
      .digest(),
  );
}

describe('the cap on TLS handshakes in progress', () => {
  it('at the cap a connection whose ClientHello arrived waits unread: its TLS handshake starts only after the stalled one holding the place is dropped', async () => {
    const { port, dropped, listener } = await listen({ tlsHandshakeMs: 1_000 }, { maxHandshakes: 1 });
    expect(listener.admission.maxHandshakes).toBe(1);
    // The first sends a genuine ClientHello and then nothing: its TLS handshake never finishes.
    const stalled = connect(port, '127.0.0.1');
    stalled.on('error', () => {});
    cleanups.push(() => stalled.destroy());
    stalled.write(await captureClientHello());
    await until(() => listener.admission.handshakes.tls === 1, 'the stalled handshake to start');
    const events: string[] = [];
    const second = rawTlsClient(port).then((c) => {
      events.push(`second: TLS done (stalled one dropped: ${dropped.includes('tls-handshake-timeout')})`);
      cleanups.push(() => c.socket.destroy());
    });
    await until(() => listener.admission.handshakes.queued === 1, 'the second to queue');
    await second;
    expect(events).toEqual(['second: TLS done (stalled one dropped: true)']);
  });

  it('a connection silent after its TLS handshake holds no place: the next handshake runs while it is still open', async () => {
    const { port, dropped, listener } = await listen({ attestationMs: 30_000 }, { maxHandshakes: 1 });
    const silent = await rawTlsClient(port);
    cleanups.push(() => silent.socket.destroy());
    const second = await rawTlsClient(port);
    cleanups.push(() => second.socket.destroy());
    // The client is done before the server has read its Finished; then both are past TLS.
    await until(() => listener.admission.handshakes.tls === 0, 'both TLS handshakes to end');
    expect(listener.admission.handshakes).toMatchObject({ inProgress: 2, queued: 0 });
    expect(dropped).toEqual([]);
  });
});

/** A genuine TLS 1.3 ClientHello from node:tls, captured once by a plain TCP server. */
async function captureClientHello(): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const srv = createServer((s) =>
      s.once('data', (d: Buffer) => {
        resolve(d);
        s.destroy();
        srv.close();
      }),
    );
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address() as AddressInfo;
      const c = tlsConnect({
        port: address.port,
        host: '127.0.0.1',
        minVersion: 'TLSv1.3',
        rejectUnauthorized: false,
      });
      c.on('error', () => {});
    });
  });
}

describe('phase deadlines of the attestation exchange', () => {
  it('a large ATTESTATION frame gets its size ÷ the floor on top of the base deadline: a body that arrives after the base deadline is still verified', async () => {
    // Base 300 ms, floor 500 B/s, 2,000-byte body: 4.3 s in all; the body comes after ~1 s.
    const { port, dropped, refused } = await listen({
      attestationMs: 300,
      attestationMinBytesPerSecond: 500,
    });
    const { socket } = await rawTlsClient(port);
    cleanups.push(() => socket.destroy());
    const frame = encodeAttestationFrame('1.3.9900.1.1', new Uint8Array(2000 - 1 - 12).fill(0x41));
    socket.write(frame.subarray(0, FRAME_HEADER_BYTES + 10));
    await new Promise((r) => setTimeout(r, 1_000));
    socket.write(frame.subarray(FRAME_HEADER_BYTES + 10));
    await until(() => refused.length + dropped.length > 0, 'the outcome');
    // Verified (and refused as a bad document), not dropped for time.
    expect(dropped).toEqual([]);
    expect(refused[0]?.message).not.toMatch(/within/);
    expect(frame.readUInt8(5)).toBe(FRAME_ATTESTATION);
  });

  it('a frame whose body stalls below the floor is dropped with attestation-timeout', async () => {
    const { port, dropped, refused } = await listen({
      attestationMs: 300,
      attestationMinBytesPerSecond: 100_000,
    });
    const { socket } = await rawTlsClient(port);
    cleanups.push(() => socket.destroy());
    const frame = encodeAttestationFrame('1.3.9900.1.1', new Uint8Array(10_000));
    socket.write(frame.subarray(0, 100));
    await until(() => dropped.length > 0, 'the drop');
    expect(dropped).toEqual(['attestation-timeout']);
    expect(refused).toEqual([]);
  });

  it('a client that attests and never sends its VERDICT is dropped with verdict-timeout', async () => {
    const { port, dropped, refused, listener } = await listen({ verdictMs: 300 });
    const { socket } = await rawTlsClient(port);
    cleanups.push(() => socket.destroy());
    const doc = await new DummyIssuer().issue(spkiHash(socket), exporterNonce(socket, 'client'));
    socket.write(encodeAttestationFrame(new DummyIssuer().oid, doc));
    await until(() => dropped.length > 0, 'the drop');
    expect(dropped).toEqual(['verdict-timeout']);
    expect(refused).toEqual([]);
    expect(listener.pendingHandshakes).toBe(0);
  });

  it('a source over its cap is closed before TLS and counted', async () => {
    const dropped: DropReason[] = [];
    const listener = new AttestedTlsListener(
      { validators: [new DummyValidator()], clock, maxUnattestedPerSource: 1 },
      () => {},
    );
    listener.onDropped = (_a, r) => dropped.push(r);
    const port = await listener.listen('127.0.0.1', 0);
    cleanups.push(() => listener.close());
    const { socket } = await rawTlsClient(port);
    cleanups.push(() => socket.destroy());
    await expect(rawTlsClient(port)).rejects.toThrow(/closed during the TLS handshake/);
    expect(dropped).toEqual(['source-cap']);
    expect(listener.pendingHandshakes).toBe(1);
  });
});
