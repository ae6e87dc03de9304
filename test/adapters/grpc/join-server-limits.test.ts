/**
 * The join server's memory bounds on real grpc-js over attested TLS on 127.0.0.1: a message over the
 * receive limit is refused (RESOURCE_EXHAUSTED) before any handler runs, and an attested connection
 * beyond the connection cap is closed right after its attestation while the connection in use keeps
 * working.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { GrpcJoinTicketClient } from '../../../src/adapters/grpc/join-client.js';
import { createJoinServer } from '../../../src/adapters/grpc/join-server.js';
import type { JoinTicket, JoinTicketRequest } from '../../../src/ports/types.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
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
  limits: { maxMessageBytes?: number; maxConnections?: number },
  issue: () => Promise<JoinTicket>,
) {
  let calls = 0;
  const server = createJoinServer({
    validators: [new DummyValidator()],
    clock,
    handler: {
      issueJoinTicket: async () => {
        calls++;
        return issue();
      },
      issueRejoinTicket: async () => ({
        stateDiskKey: new Uint8Array(32),
        measurementSecret: new Uint8Array(32),
      }),
    },
    ...limits,
  });
  servers.push(server);
  const port = await server.listen('127.0.0.1', 0);
  return { server, endpoint: `127.0.0.1:${port}`, calls: () => calls };
}

const client = () => new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock });

describe('join server bounds', () => {
  it('refuses a message over the receive limit before any handler runs', async () => {
    const { endpoint, calls } = await start({ maxMessageBytes: 4096 }, async () => sampleTicket());
    await expect(client().issueJoinTicket(endpoint, request(8192))).rejects.toMatchObject({
      code: 'resource-exhausted',
    });
    expect(calls()).toBe(0);
    await expect(client().issueJoinTicket(endpoint, request(1024))).resolves.toBeDefined();
    expect(calls()).toBe(1);
  });

  it('closes an attested connection over the connection cap; the connection in use is unaffected', async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((r) => {
      release = r;
    });
    let first = true;
    const { server, endpoint, calls } = await start({ maxConnections: 1 }, async () => {
      if (first) {
        first = false;
        await held;
      }
      return sampleTicket();
    });
    const a = client().issueJoinTicket(endpoint, request(100));
    const until = Date.now() + 5_000;
    while (calls() === 0) {
      if (Date.now() > until) throw new Error('first call did not reach the handler');
      await new Promise((r) => setTimeout(r, 10));
    }
    await expect(client().issueJoinTicket(endpoint, request(100))).rejects.toBeDefined();
    expect(server.overCapConnections).toBeGreaterThanOrEqual(1);
    expect(calls()).toBe(1);
    release();
    await expect(a).resolves.toBeDefined();
  });
});
