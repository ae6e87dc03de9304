/**
 * The join server's memory bounds on real grpc-js over attested TLS on 127.0.0.1: a message over the
 * receive limit is refused (RESOURCE_EXHAUSTED) before any handler runs, and a connection beyond
 * the connection cap waits, unverified, for the connection in use to close (its client, answered by
 * the server, keeps waiting past its connect deadline) and is then served.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { DEFAULT_ATLS_DEADLINES } from '../../../src/adapters/grpc/atls/admission-settings.js';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { GrpcJoinTicketClient } from '../../../src/adapters/grpc/join-client.js';
import { createJoinServer } from '../../../src/adapters/grpc/join-server.js';
import type { JoinTicket, JoinTicketRequest } from '../../../src/ports/types.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { joinCallOf } from '../../support/join-call.js';
import { clock, sampleTicket } from './helpers.js';

const request = (csrBytes: number): JoinTicketRequest => ({
  diskUuid: 'c0ffee00-0000-4000-8000-000000000001',
  certificateRequest: new Uint8Array(csrBytes),
  isControlPlane: false,
  hostPublicKey: new Uint8Array(0),
  hostCertificatePrincipals: [],
});

const servers: AttestedGrpcServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.shutdown(200)));
});

async function start(
  limits: { maxMessageBytes?: number; maxConnections?: number; validators?: DummyValidator[] },
  issue: () => Promise<JoinTicket>,
) {
  let calls = 0;
  const server = createJoinServer({
    validators: limits.validators ?? [new DummyValidator()],
    clock,
    joinCall: joinCallOf({
      issueJoinTicket: async () => {
        calls++;
        return issue();
      },
      issueRejoinTicket: async () => ({
        stateDiskKey: new Uint8Array(32),
        measurementSecret: new Uint8Array(32),
      }),
    }),
    ...(limits.maxMessageBytes !== undefined ? { maxMessageBytes: limits.maxMessageBytes } : {}),
    ...(limits.maxConnections !== undefined ? { maxConnections: limits.maxConnections } : {}),
  });
  servers.push(server);
  const port = await server.listen('127.0.0.1', 0);
  return { server, endpoint: `127.0.0.1:${port}`, calls: () => calls };
}

const client = () => new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock });

describe('join server bounds', () => {
  it('hands its admission settings to the listener under their one name (caps, slots, deadlines)', () => {
    const server = createJoinServer({
      validators: [new DummyValidator()],
      clock,
      joinCall: joinCallOf({
        issueJoinTicket: async () => sampleTicket(),
        issueRejoinTicket: async () => ({
          stateDiskKey: new Uint8Array(32),
          measurementSecret: new Uint8Array(32),
        }),
      }),
      maxUnattested: 5,
      maxConnections: 3,
      handshakeTimeoutMs: 7_000,
      deadlines: { verdictMs: 123 },
    });
    const admission = server.tls.admission;
    expect(admission.maxUnattested).toBe(5);
    expect(admission.maxConnections).toBe(3);
    expect(admission.connections?.max).toBe(3);
    expect(admission.handshakeTimeoutMs).toBe(7_000);
    expect(admission.deadlines).toEqual({ ...DEFAULT_ATLS_DEADLINES, verdictMs: 123 });
    expect(() =>
      createJoinServer({
        validators: [new DummyValidator()],
        clock,
        joinCall: joinCallOf({
          issueJoinTicket: async () => sampleTicket(),
          issueRejoinTicket: async () => ({
            stateDiskKey: new Uint8Array(32),
            measurementSecret: new Uint8Array(32),
          }),
        }),
        deadlines: { clientHelloMs: 0 },
      }),
    ).toThrow('attested TLS deadline clientHelloMs must be > 0, got 0');
  });

  it('refuses a message over the receive limit before any handler runs', async () => {
    const { endpoint, calls } = await start({ maxMessageBytes: 4096 }, async () => sampleTicket());
    await expect(client().issueJoinTicket(endpoint, request(8192))).rejects.toMatchObject({
      code: 'resource-exhausted',
    });
    expect(calls()).toBe(0);
    await expect(client().issueJoinTicket(endpoint, request(1024))).resolves.toBeDefined();
    expect(calls()).toBe(1);
  });

  it('holds a connection over the connection cap unverified until one closes; the client, answered, waits past its connect deadline', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    let first = true;
    const validator = new DummyValidator();
    const { server, endpoint, calls } = await start(
      { maxConnections: 1, validators: [validator] },
      async () => {
        if (first) {
          first = false;
          await held;
        }
        return sampleTicket();
      },
    );
    const a = client().issueJoinTicket(endpoint, request(100));
    const until = Date.now() + 5_000;
    while (calls() === 0) {
      if (Date.now() > until) throw new Error('first call did not reach the handler');
      await new Promise((r) => setTimeout(r, 10));
    }
    const connectTimeoutMs = 300;
    const second = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock, connectTimeoutMs });
    let secondSettled = false;
    const b = second.issueJoinTicket(endpoint, request(100)).finally(() => {
      secondSettled = true;
    });
    while (server.connectionsWaiting === 0) {
      if (Date.now() > until) throw new Error('second connection did not wait for a connection slot');
      await new Promise((r) => setTimeout(r, 10));
    }
    // Well past the second client's connect deadline: it got the server's answer, so it still waits.
    await new Promise((r) => setTimeout(r, 3 * connectTimeoutMs));
    expect(secondSettled).toBe(false);
    // The waiting connection was not verified, and no second call reached the handler.
    expect(validator.calls).toHaveLength(1);
    expect(calls()).toBe(1);
    expect(server.overCapConnections).toBe(0);
    release();
    await expect(a).resolves.toBeDefined();
    await expect(b).resolves.toBeDefined();
    expect(validator.calls).toHaveLength(2);
    expect(calls()).toBe(2);
  });
});
