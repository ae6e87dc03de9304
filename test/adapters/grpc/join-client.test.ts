/**
 * One join call is one connection: after a refused attested TLS connection grpc-js reconnects in
 * the background (even after client.close()), which would cost the node a second TPM quote and the
 * join service a second audit event. The credentials refuse to reconnect once the call finished or
 * grpc-js destroyed the connector. Also: `localAddress` makes the connection leave from a given
 * loopback address, so the join service sees the node's own address. Real grpc-js, attested TLS on
 * 127.0.0.x; the attestation itself is the test-only dummy.
 */
import type { Socket } from 'node:net';
import { Metadata } from '@grpc/grpc-js';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { AttestedChannelCredentials } from '../../../src/adapters/grpc/atls/credentials.js';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { GrpcJoinTicketClient } from '../../../src/adapters/grpc/join-client.js';
import { createJoinServer } from '../../../src/adapters/grpc/join-server.js';
import { joinRequestToProto } from '../../../src/adapters/grpc/mapping.js';
import { APIClient as JoinAPIClient } from '../../../src/gen/join.js';
import { isAttestationError, isConfbootError } from '../../../src/ports/errors.js';
import type { JoinTicketRequest } from '../../../src/ports/types.js';
import type { Validator } from '../../../src/ports/validator.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { type AttestedCaller, joinCallOf } from '../../support/join-call.js';
import { clock, RefusingValidator, sampleTicket } from './helpers.js';

const request: JoinTicketRequest = {
  diskUuid: 'c0ffee00-0000-4000-8000-000000000001',
  certificateRequest: new Uint8Array([0x30, 0x82, 0x01]),
  isControlPlane: false,
  hostPublicKey: new Uint8Array(0),
  hostCertificatePrincipals: [],
};

/** Counts the quotes a node makes: one per attested connection. */
class CountingIssuer extends DummyIssuer {
  quotes = 0;
  override async issue(userData: Uint8Array, nonce: Uint8Array): Promise<Uint8Array> {
    this.quotes++;
    return super.issue(userData, nonce);
  }
}

const servers: AttestedGrpcServer[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(servers.splice(0).map((s) => s.shutdown(200)));
});

async function start(validator: Validator) {
  const calls: AttestedCaller[] = [];
  const refused: string[] = [];
  const server = createJoinServer({
    validators: [validator],
    clock,
    joinCall: joinCallOf({
      async issueJoinTicket(_r, ctx) {
        calls.push(ctx);
        return sampleTicket();
      },
      async issueRejoinTicket() {
        throw new Error('not used');
      },
    }),
  });
  server.tls.onRefused = (address) => refused.push(address);
  servers.push(server);
  const port = await server.listen('127.0.0.1', 0);
  return { endpoint: `127.0.0.1:${port}`, calls, refused };
}

/** Watches every connector grpc-js gets from AttestedChannelCredentials: each waitForReady outcome. */
function watchConnectors() {
  const attempts: Array<{ at: 'before' | 'after'; outcome: Promise<'ready' | 'refused'> }> = [];
  let phase: 'before' | 'after' = 'before';
  const original = AttestedChannelCredentials.prototype._createSecureConnector;
  vi.spyOn(AttestedChannelCredentials.prototype, '_createSecureConnector').mockImplementation(function (
    this: AttestedChannelCredentials,
    ...args
  ) {
    const inner = original.apply(this, args);
    return {
      ...inner,
      waitForReady: () => {
        const p = inner.waitForReady();
        attempts.push({
          at: phase,
          outcome: p.then(
            () => 'ready' as const,
            () => 'refused' as const,
          ),
        });
        return p;
      },
    };
  });
  return {
    attempts,
    callFinished: () => {
      phase = 'after';
    },
    /** Resolves with grpc-js's first connection attempt after the call (bounded: 10 s). */
    async nextAttempt(): Promise<'ready' | 'refused'> {
      const until = Date.now() + 10_000;
      for (;;) {
        const a = attempts.find((x) => x.at === 'after');
        if (a) return a.outcome;
        if (Date.now() > until) throw new Error('grpc-js made no connection attempt after the call');
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}

describe('one join call, one connection', () => {
  it("a refused call makes exactly one connection and one quote; grpc-js's background reconnect is refused before any TCP connection", async () => {
    const { endpoint, refused } = await start(new RefusingValidator());
    const watch = watchConnectors();
    const issuer = new CountingIssuer();
    const client = new GrpcJoinTicketClient({ issuer, clock });
    const err = await client.issueJoinTicket(endpoint, request).catch((e: unknown) => e);
    watch.callFinished();
    expect(isAttestationError(err) && err.check).toBe('pcr-values');
    // grpc-js does try again about a second later (after its backoff); the connector refuses.
    expect(await watch.nextAttempt()).toBe('refused');
    expect(issuer.quotes).toBe(1);
    expect(refused).toHaveLength(1);
  });

  it('a successful call makes one connection too', async () => {
    const { endpoint, calls } = await start(new DummyValidator());
    const issuer = new CountingIssuer();
    await new GrpcJoinTicketClient({ issuer, clock }).issueJoinTicket(endpoint, request);
    expect(issuer.quotes).toBe(1);
    expect(calls).toHaveLength(1);
  });

  it("finish() and the connector's destroy() stop new connections; an open socket is closed", async () => {
    const creds = new AttestedChannelCredentials({ issuer: new DummyIssuer(), clock });
    const target = { scheme: 'dns', authority: undefined, path: '127.0.0.1:1' };
    const a = creds._createSecureConnector(target, {});
    await expect(a.waitForReady()).resolves.toBeUndefined();
    a.destroy();
    await expect(a.waitForReady()).rejects.toThrow(/has finished; not reconnecting/);
    const b = creds._createSecureConnector(target, {});
    creds.finish();
    await expect(b.waitForReady()).rejects.toThrow(/has finished/);
    const socket = { destroy: vi.fn() } as unknown as Socket;
    await expect(b.connect(socket)).rejects.toThrow(/has finished/);
    expect(socket.destroy).toHaveBeenCalled();
  });
});

describe("localAddress: the connection leaves from the node's own address", () => {
  it('the join service sees the caller at the bound 127.0.0.x address', async () => {
    const { endpoint, calls } = await start(new DummyValidator());
    for (const local of ['127.0.0.5', '127.0.0.6']) {
      await new GrpcJoinTicketClient({
        issuer: new DummyIssuer(),
        clock,
        localAddress: local,
      }).issueJoinTicket(endpoint, request);
    }
    expect(calls.map((c) => c.peer.replace(/:\d+$/, ''))).toEqual(['127.0.0.5', '127.0.0.6']);
  });

  it("works with a host name endpoint (resolved by grpc-js's DNS resolver, IPv4 addresses kept)", async () => {
    const { endpoint, calls } = await start(new DummyValidator());
    const port = endpoint.split(':')[1];
    await new GrpcJoinTicketClient({
      issuer: new DummyIssuer(),
      clock,
      localAddress: '127.0.0.7',
    }).issueJoinTicket(`localhost:${port}`, request);
    expect(calls[0]?.peer).toMatch(/^127\.0\.0\.7:\d+$/);
  });

  it('without localAddress the target is the endpoint unchanged', () => {
    const creds = new AttestedChannelCredentials({ issuer: new DummyIssuer(), clock });
    expect(creds.target('10.0.0.1:30090')).toBe('10.0.0.1:30090');
    const bound = new AttestedChannelCredentials({
      issuer: new DummyIssuer(),
      clock,
      localAddress: '127.0.0.9',
    });
    expect(bound.target('10.0.0.1:30090')).toBe('confboot-bound://127.0.0.9/10.0.0.1:30090');
  });

  it("an endpoint with no address of the local address's family fails UNAVAILABLE, naming both", async () => {
    const client = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock, localAddress: '127.0.0.5' });
    const err = await client
      .issueJoinTicket('[::1]:1', request, { timeoutInMs: 5_000 })
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect((err as Error).message).toContain(
      '[::1]:1 has no IPv4 address to reach from local address 127.0.0.5',
    );
  });

  it('a local address that is not an IP is refused up front', () => {
    expect(
      () => new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock, localAddress: 'node-1' }),
    ).toThrow(/local address "node-1" is not an IP address/);
    expect(
      () => new AttestedChannelCredentials({ issuer: new DummyIssuer(), clock, localAddress: '' }),
    ).toThrow(/is not an IP address/);
  });

  it('a connection that did not leave from the local address is refused before attesting (no quote)', async () => {
    const { endpoint, calls } = await start(new DummyValidator());
    const issuer = new CountingIssuer();
    const creds = new AttestedChannelCredentials({ issuer, clock, localAddress: '127.0.0.5' });
    // Wrong use: the plain endpoint as target, so grpc-js connects from 127.0.0.1.
    const client = new JoinAPIClient(endpoint, creds, { 'grpc.use_local_subchannel_pool': 1 });
    const err = await new Promise<Error | null>((resolve) =>
      client.issueJoinTicket(
        joinRequestToProto(request),
        new Metadata(),
        { deadline: Date.now() + 5_000 },
        (e) => resolve(e),
      ),
    );
    creds.finish();
    client.close();
    expect(err?.message).toMatch(/UNAVAILABLE/);
    expect(creds.refusal()?.message).toMatch(
      /connection left from 127\.0\.0\.1, not from local address 127\.0\.0\.5/,
    );
    expect(issuer.quotes).toBe(0);
    expect(calls).toHaveLength(0);
  });
});
