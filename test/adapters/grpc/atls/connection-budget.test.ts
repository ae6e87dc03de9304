/**
 * ConnectionBudget on real loopback sockets: the ClientHello wait gives the bytes back whole, each
 * phase deadline drops the connection naming the phase, and the scarce work runs under the slots.
 */
import { type AddressInfo, connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { isAdmissionDrop } from '../../../../src/adapters/grpc/atls/admission-drop.js';
import { Slots } from '../../../../src/adapters/grpc/atls/admission-limits.js';
import { DEFAULT_ATLS_DEADLINES } from '../../../../src/adapters/grpc/atls/admission-settings.js';
import { type BudgetScope, ConnectionBudget } from '../../../../src/adapters/grpc/atls/connection-budget.js';

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

/** A connected pair on 127.0.0.1: the server's accepted socket and the client's. */
async function pair(): Promise<{ server: Socket; client: Socket }> {
  const srv: Server = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const accepted = new Promise<Socket>((r) => srv.once('connection', r));
  const client = connect((srv.address() as AddressInfo).port, '127.0.0.1');
  const server = await accepted;
  cleanups.push(() => {
    client.destroy();
    server.destroy();
    srv.close();
  });
  return { server, client };
}

function scope(deadlines: Partial<typeof DEFAULT_ATLS_DEADLINES> = {}): BudgetScope & { held: number } {
  const s = {
    held: 0,
    deadlines: { ...DEFAULT_ATLS_DEADLINES, ...deadlines },
    handshakeTimeoutMs: 30_000,
    verification: new Slots(1),
    issuance: new Slots(1),
    connections: undefined,
    holdSource: () => {
      s.held++;
      return () => s.held--;
    },
  };
  return s;
}

describe('ConnectionBudget', () => {
  it('waits for a complete ClientHello record and gives every byte back to the socket', async () => {
    const { server, client } = await pair();
    const budget = new ConnectionBudget(scope(), server, () => {});
    const hello = budget.clientHello();
    // A TLS handshake record of 6 bytes, sent in two pieces.
    const record = Buffer.from([0x16, 0x03, 0x01, 0x00, 0x06, 1, 2, 3, 4, 5, 6]);
    client.write(record.subarray(0, 4));
    await new Promise((r) => setTimeout(r, 20));
    client.write(record.subarray(4));
    await hello;
    expect(server.read()).toEqual(record);
    budget.end();
  });

  it('no ClientHello within its deadline: dropped as client-hello-timeout', async () => {
    const { server } = await pair();
    const budget = new ConnectionBudget(scope({ clientHelloMs: 30 }), server, () => {});
    const err = await budget.clientHello().catch((e: unknown) => e);
    expect(isAdmissionDrop(err) && err.reason).toBe('client-hello-timeout');
  });

  it('the peer closing before its ClientHello: dropped as peer-closed', async () => {
    const { server, client } = await pair();
    const budget = new ConnectionBudget(scope(), server, () => {});
    const hello = budget.clientHello();
    client.end();
    const err = await hello.catch((e: unknown) => e);
    expect(isAdmissionDrop(err) && err.reason).toBe('peer-closed');
  });

  it('the TLS phase past its deadline aborts the signal with tls-handshake-timeout', async () => {
    const { server } = await pair();
    const budget = new ConnectionBudget(scope({ tlsHandshakeMs: 30 }), server, () => {});
    const err = await budget
      .tlsHandshake(
        (signal) =>
          new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      )
      .catch((e: unknown) => e);
    expect(isAdmissionDrop(err) && err.reason).toBe('tls-handshake-timeout');
    expect(budget.signal.aborted).toBe(true);
  });

  it('verification runs under its slot: a second waits until the first is done', async () => {
    const { server } = await pair();
    const s = scope();
    const budget = new ConnectionBudget(s, server, () => {});
    let finish: () => void = () => {};
    const first = budget.verifying(() => new Promise<void>((r) => (finish = r)));
    await new Promise((r) => setImmediate(r));
    const order: string[] = [];
    const second = budget.verifying(async () => order.push('second'));
    await new Promise((r) => setImmediate(r));
    expect(order).toEqual([]);
    expect(s.verification.waiting).toBe(1);
    finish();
    await Promise.all([first, second]);
    expect(order).toEqual(['second']);
  });

  it('an attested connection holds its source place until it closes; release gives the caps place back once', async () => {
    const { server } = await pair();
    const s = scope();
    let forgotten = 0;
    const budget = new ConnectionBudget(s, server, () => forgotten++);
    await budget.holdConnection(server as never);
    expect(s.held).toBe(1);
    server.destroy();
    await new Promise((r) => server.once('close', r));
    expect(s.held).toBe(0);
    budget.release();
    budget.release();
    expect(forgotten).toBe(1);
  });
});
