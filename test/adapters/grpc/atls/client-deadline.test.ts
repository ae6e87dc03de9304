/**
 * The client end's bounds (atls/client-deadline.ts) on real loopback sockets: a server that never
 * finishes the TLS handshake, and one that closes during it, end the client's attempt with the
 * client's own errors (never the server's admission drops); the server's
 * first attested TLS frame resolves `answered` before the exchange is over. Outcomes only, no
 * durations.
 */
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { isAdmissionDrop } from '../../../../src/adapters/grpc/atls/admission-drop.js';
import { ClientDeadline } from '../../../../src/adapters/grpc/atls/client-deadline.js';
import { attestSocket } from '../../../../src/adapters/grpc/atls/connection.js';
import { AttestedTlsListener } from '../../../../src/adapters/grpc/atls/listener.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { DummyIssuer, DummyValidator } from '../../../support/dummy-attestation.js';
import { clock } from '../helpers.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A TCP server doing `onSocket` with every connection; resolves with a connected client socket. */
async function rawServer(onSocket: (s: Socket) => void): Promise<Socket> {
  const held: Socket[] = [];
  const server: Server = createServer((s) => {
    held.push(s);
    s.on('error', () => {});
    onSocket(s);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanups.push(() => {
    for (const s of held) s.destroy();
    return new Promise((r) => server.close(r));
  });
  const { port } = server.address() as { port: number };
  const raw = netConnect({ host: '127.0.0.1', port });
  raw.on('error', () => {});
  await new Promise<void>((resolve, reject) => {
    raw.once('connect', resolve);
    raw.once('error', reject);
  });
  return raw;
}

describe('ClientDeadline', () => {
  it('a server silent after TCP: deadline-exceeded naming the TLS handshake, not an admission drop', async () => {
    const raw = await rawServer(() => {});
    const budget = new ClientDeadline({ tlsHandshakeTimeoutMs: 200 });
    const err = await attestSocket(raw, 'client', { clock, issuer: new DummyIssuer() }, { budget }).catch(
      (e: unknown) => e,
    );
    expect(isConfbootError(err) && err.code).toBe('deadline-exceeded');
    expect((err as Error).message).toBe('no completed TLS handshake within 200 ms');
    expect(isAdmissionDrop(err)).toBe(false);
    expect(raw.destroyed).toBe(true);
  });

  it('a server closing during the TLS handshake: the client error, not an admission drop', async () => {
    const raw = await rawServer((s) => s.once('data', () => s.destroy()));
    const err = await attestSocket(raw, 'client', { clock, issuer: new DummyIssuer() }).catch(
      (e: unknown) => e,
    );
    // Node reports the close as a TLS error (refused as not speaking attested TLS) or as a close.
    expect(isConfbootError(err) && ['permission-denied', 'unavailable'].includes(err.code)).toBe(true);
    expect(isAdmissionDrop(err)).toBe(false);
    expect(raw.destroyed).toBe(true);
  });

  it('answered resolves with the server first frame; the attempt then ends attested', async () => {
    const listener = new AttestedTlsListener({ clock, validators: [new DummyValidator()] }, (s) =>
      s.destroy(),
    );
    const port = await listener.listen('127.0.0.1', 0);
    cleanups.push(() => listener.close());
    const raw = netConnect({ host: '127.0.0.1', port });
    raw.on('error', () => {});
    await new Promise<void>((resolve) => raw.once('connect', resolve));
    const budget = new ClientDeadline();
    const order: string[] = [];
    void budget.answered.then(() => order.push('answered'));
    const { socket } = await attestSocket(raw, 'client', { clock, issuer: new DummyIssuer() }, { budget });
    order.push('attested');
    socket.destroy();
    expect(order).toEqual(['answered', 'attested']);
  });

  it('refuses a deadline that is not a positive number', () => {
    expect(() => new ClientDeadline({ tlsHandshakeTimeoutMs: 0 })).toThrow(
      'attested TLS client: tlsHandshakeTimeoutMs must be > 0, got 0',
    );
  });
});
