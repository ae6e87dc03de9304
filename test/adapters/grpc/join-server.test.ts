/**
 * Join round trips through real grpc-js over attested TLS on 127.0.0.1: the node attests with its
 * Issuer, the handler sees the validated attestation and the peer address, errors keep their
 * status, timeouts and aborts come from CallOptions, concurrent connections, graceful shutdown.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { GrpcJoinTicketClient } from '../../../src/adapters/grpc/join-client.js';
import { createJoinServer } from '../../../src/adapters/grpc/join-server.js';
import {
  type AttestationError,
  CONNECTION_REFUSED,
  ConfbootError,
  isAttestationError,
} from '../../../src/ports/errors.js';
import type { JoinTicketRequest } from '../../../src/ports/types.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { type AttestedCaller, joinCallOf, type ThrowingJoinCall } from '../../support/join-call.js';
import { freePort } from '../../support/net.js';
import { clock, RefusingValidator, sampleTicket } from './helpers.js';

const request: JoinTicketRequest = {
  diskUuid: 'c0ffee00-0000-4000-8000-000000000001',
  certificateRequest: new Uint8Array([0x30, 0x82, 0x01]),
  isControlPlane: true,
  hostPublicKey: new Uint8Array([0, 0, 0, 11]),
  hostCertificatePrincipals: ['10.0.0.5'],
};

const servers: AttestedGrpcServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.shutdown(200)));
});

async function start(handler: Partial<ThrowingJoinCall>, validators = [new DummyValidator()]) {
  const seen: Array<{ request: unknown; ctx: AttestedCaller }> = [];
  const server = createJoinServer({
    validators,
    clock,
    joinCall: joinCallOf({
      async issueJoinTicket(r, ctx) {
        seen.push({ request: r, ctx });
        if (handler.issueJoinTicket) return handler.issueJoinTicket(r, ctx);
        return sampleTicket();
      },
      async issueRejoinTicket(r, ctx) {
        seen.push({ request: r, ctx });
        if (handler.issueRejoinTicket) return handler.issueRejoinTicket(r, ctx);
        return { stateDiskKey: new Uint8Array(32).fill(5), measurementSecret: new Uint8Array(32).fill(6) };
      },
    }),
  });
  servers.push(server);
  const port = await server.listen('127.0.0.1', 0);
  return { server, endpoint: `127.0.0.1:${port}`, seen };
}

describe('join over attested TLS', () => {
  it('round trip: the ticket arrives intact and the handler sees the attested caller', async () => {
    const { endpoint, seen } = await start({});
    const client = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock });
    const ticket = await client.issueJoinTicket(endpoint, request);
    expect(Buffer.from(ticket.stateDiskKey).equals(Buffer.alloc(32, 0x11))).toBe(true);
    expect(ticket.controlPlaneFiles).toEqual([{ name: 'etcd/ca.key', data: new Uint8Array([1, 2, 3]) }]);
    expect(ticket.kubernetesComponents[0]?.installPath).toBe('/opt/y');
    expect(seen).toHaveLength(1);
    const { ctx } = seen[0]!;
    expect(ctx.variant).toBe('dummy');
    expect(ctx.peer).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(ctx.attestation.checks.every((c) => c.ok)).toBe(true);
    expect(ctx.attestation.userData).toHaveLength(32);
    expect(seen[0]?.request).toMatchObject({
      diskUuid: request.diskUuid,
      isControlPlane: true,
      hostCertificatePrincipals: ['10.0.0.5'],
    });
  });

  it('rejoin round trip', async () => {
    const { endpoint } = await start({});
    const client = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock });
    const t = await client.issueRejoinTicket(endpoint, { diskUuid: 'x' });
    expect(Array.from(t.measurementSecret)).toEqual(Array(32).fill(6));
  });

  it('handler errors keep their code through gRPC, led by their reason code; unknown errors become internal without their message', async () => {
    const errors = [
      new ConfbootError('invalid-argument', 'CSR subject must start with system:node:', {
        reason: 'malformed-request',
      }),
      new ConfbootError('permission-denied', 'node identity node-7 is on the deny list'),
      new ConfbootError('unavailable', 'key service at 10.0.0.9:9000 unreachable'),
      new ConfbootError('resource-exhausted', 'rate limit reached'),
      new ConfbootError('failed-precondition', 'another control plane is joining'),
      new Error('secret-key-material-deadbeef'),
    ];
    let i = 0;
    const { endpoint } = await start({
      async issueJoinTicket() {
        throw errors[i++];
      },
    });
    const client = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock });
    const got: Array<[string, boolean, string]> = [];
    for (let k = 0; k < errors.length; k++) {
      const e = (await client.issueJoinTicket(endpoint, request).catch((x: unknown) => x)) as ConfbootError;
      got.push([e.code, e.recoverable, e.message]);
    }
    expect(got.map((g) => g[0])).toEqual([
      'invalid-argument',
      'permission-denied',
      'unavailable',
      'resource-exhausted',
      'failed-precondition',
      'internal',
    ]);
    expect(got.map((g) => g[1])).toEqual([false, false, true, true, false, false]);
    expect(got[0]?.[2]).toMatch(
      /^issuing join ticket from 127\.0\.0\.1:\d+: reason=malformed-request issuing join ticket for 127\.0\.0\.1:\d+: CSR subject must start with system:node:$/,
    );
    // A refusal that carries no reason code is internal, whatever its kind.
    expect(got[1]?.[2]).toContain(': reason=internal issuing join ticket for ');
    expect(got[5]?.[2]).toMatch(
      /: reason=internal issuing join ticket for 127\.0\.0\.1:\d+: internal error$/,
    );
    expect(got[5]?.[2]).not.toContain('secret-key-material');
  });

  it('a node whose attestation fails gets an AttestationError naming the check, and no handler runs', async () => {
    const { endpoint, seen } = await start({}, [new RefusingValidator()]);
    const client = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock });
    const e = await client.issueJoinTicket(endpoint, request).catch((x: unknown) => x);
    expect(isAttestationError(e)).toBe(true);
    expect((e as AttestationError).check).toBe('pcr-values');
    expect((e as AttestationError).code).toBe('permission-denied');
    expect((e as Error).message).toMatch(
      /^issuing join ticket from 127\.0\.0\.1:\d+: refused by the peer \(check pcr-values\)/,
    );
    expect(seen).toHaveLength(0);
  });

  it('mutual: the node can also verify the join service', async () => {
    const server = createJoinServer({
      validators: [new DummyValidator()],
      issuer: new DummyIssuer('qemu-vtpm'),
      clock,
      joinCall: joinCallOf({
        issueJoinTicket: async () => sampleTicket(),
        issueRejoinTicket: async () => ({
          stateDiskKey: new Uint8Array(),
          measurementSecret: new Uint8Array(),
        }),
      }),
    });
    servers.push(server);
    const port = await server.listen('127.0.0.1', 0);
    const ok = new GrpcJoinTicketClient({
      issuer: new DummyIssuer(),
      validators: [new DummyValidator('qemu-vtpm')],
      clock,
    });
    expect((await ok.issueJoinTicket(`127.0.0.1:${port}`, request)).token).toBe('abcdef.0123456789abcdef');
    const wrong = new GrpcJoinTicketClient({
      issuer: new DummyIssuer(),
      validators: [new DummyValidator()],
      clock,
    });
    const e = await wrong.issueJoinTicket(`127.0.0.1:${port}`, request).catch((x: unknown) => x);
    expect((e as AttestationError).check).toBe('unknown-oid');
  });

  it('unreachable endpoint: unavailable and recoverable', async () => {
    const port = await freePort();
    const client = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock });
    const e = (await client
      .issueJoinTicket(`127.0.0.1:${port}`, request)
      .catch((x: unknown) => x)) as ConfbootError;
    expect(e.code).toBe('unavailable');
    expect(e.recoverable).toBe(true);
    expect(e.message).toContain(`issuing join ticket from 127.0.0.1:${port}`);
  });

  it('a refused TCP connection carries the reason connection-refused; a refused attestation or a handler refusal does not', async () => {
    const port = await freePort();
    const logger = new FakeLogger();
    const client = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock, logger });
    const refused = await client.issueJoinTicket(`127.0.0.1:${port}`, request).catch((x: unknown) => x);
    expect(refused).toMatchObject({ code: 'unavailable', reason: CONNECTION_REFUSED });
    // Nothing listening is the join flow's to report (once per interval); the client logs it at debug.
    expect(logger.events.map((e) => `${e.level} ${e.msg}`)).toEqual(['debug Join service call failed']);

    const { endpoint: attesting } = await start({}, [new RefusingValidator()]);
    const denied = await client.issueJoinTicket(attesting, request).catch((x: unknown) => x);
    expect(denied).toMatchObject({ code: 'permission-denied', reason: undefined });
    expect(logger.events.map((e) => `${e.level} ${e.msg}`)).toEqual([
      'debug Join service call failed',
      'warn Join service call failed',
    ]);

    const { endpoint: refusing } = await start({
      async issueJoinTicket() {
        throw new ConfbootError('permission-denied', 'connection refused by policy (ECONNREFUSED in text)');
      },
    });
    const byHandler = await client.issueJoinTicket(refusing, request).catch((x: unknown) => x);
    expect(byHandler).toMatchObject({ code: 'permission-denied', reason: undefined });
  });

  it('timeoutInMs bounds the call (deadline-exceeded); abort cancels it', async () => {
    let release: () => void = () => {};
    const { endpoint } = await start({
      issueJoinTicket: () =>
        new Promise((resolve) => {
          release = () => resolve(sampleTicket());
        }),
    });
    const client = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock });
    const e = (await client
      .issueJoinTicket(endpoint, request, { timeoutInMs: 300 })
      .catch((x: unknown) => x)) as ConfbootError;
    expect(e.code).toBe('deadline-exceeded');
    release();
    const controller = new AbortController();
    const pending = client
      .issueJoinTicket(endpoint, request, { signal: controller.signal })
      .catch((x: unknown) => x);
    setTimeout(() => controller.abort(new Error('stop')), 200);
    const aborted = (await pending) as ConfbootError;
    expect(aborted.message).toContain('aborted');
    release();
    const already = await client
      .issueJoinTicket(endpoint, request, { signal: AbortSignal.abort() })
      .catch((x: unknown) => x);
    expect((already as Error).message).toContain('aborted');
  });

  it('concurrent nodes: each on its own attested connection', async () => {
    const { endpoint, seen } = await start({});
    const results = await Promise.all(
      Array.from({ length: 16 }, () =>
        new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock }).issueJoinTicket(endpoint, request),
      ),
    );
    expect(results.every((t) => t.token === 'abcdef.0123456789abcdef')).toBe(true);
    expect(new Set(seen.map((s) => s.ctx.peer)).size).toBe(16);
    // The clients share the process's one client TLS identity, so all bind the same key (their
    // nonces differ: atls/identity-pool.test.ts, test/attack/session-binding.test.ts).
    expect(new Set(seen.map((s) => Buffer.from(s.ctx.attestation.userData).toString('hex'))).size).toBe(1);
  });

  it('graceful shutdown lets a running call finish and then refuses new connections', async () => {
    let release: () => void = () => {};
    let entered: () => void = () => {};
    const handlerEntered = new Promise<void>((r) => {
      entered = r;
    });
    const { server, endpoint } = await start({
      issueJoinTicket: () =>
        new Promise((resolve) => {
          release = () => resolve(sampleTicket());
          entered();
        }),
    });
    const client = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock });
    const running = client.issueJoinTicket(endpoint, request);
    // Shut down only once the call is really running in the handler (not merely connected).
    await handlerEntered;
    const stopped = server.shutdown(5000);
    setTimeout(() => release(), 100);
    expect((await running).token).toBe('abcdef.0123456789abcdef');
    await stopped;
    const after = (await client.issueJoinTicket(endpoint, request).catch((x: unknown) => x)) as ConfbootError;
    expect(after.code).toBe('unavailable');
  });

  it('needs at least one validator', () => {
    expect(() =>
      createJoinServer({
        validators: [],
        clock,
        joinCall: joinCallOf({
          issueJoinTicket: async () => sampleTicket(),
          issueRejoinTicket: async () => ({
            stateDiskKey: new Uint8Array(),
            measurementSecret: new Uint8Array(),
          }),
        }),
      }),
    ).toThrow(/at least one validator/);
  });
});
