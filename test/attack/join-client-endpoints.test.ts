/**
 * The joining node does not spend its call deadline on one stalling endpoint: the join flow
 * (domain JoinFlow with the real GrpcJoinTicketClient, real attested TLS, a real swtpm quote)
 * lists the load balancer first and the control plane second. The load balancer address is a
 * silent endpoint — it accepts TCP (or completes TLS) and then never answers. The client gives up
 * on it at its short connect/handshake deadline and gets its ticket from the control plane, within
 * one round of the flow (no backoff sleep, no second round). Asserted as orderings: the silent
 * endpoint's call failed with the handshake deadline (not the 30 s call deadline) before the honest
 * endpoint was asked, and the silent endpoint saw exactly one connection. The rest of the node
 * (disk, lock, kubeadm) is the domain suite's stubs.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTlsIdentity } from '../../src/adapters/grpc/atls/certificate.js';
import { GrpcJoinTicketClient } from '../../src/adapters/grpc/join-client.js';
import { X509CsrFactory } from '../../src/adapters/pki/x509-csr-factory.js';
import { SystemClock } from '../../src/adapters/system/system-clock.js';
import { JoinFlow } from '../../src/domain/join-flow.js';
import type { JoinTicketClient } from '../../src/ports/join-ticket-client.js';
import type { CallOptions, JoinTicket, JoinTicketRequest } from '../../src/ports/types.js';
import { joinFlowStubs } from '../domain/stubs.js';
import { DEFAULT_NODE } from './support/attack.js';
import type { SwtpmNode } from './support/nodes.js';
import { startTargetWithNode, type Target } from './support/target.js';

const SILENT_HOST = '127.0.0.3';
const clock = new SystemClock();
let target: Target;
let node: SwtpmNode;

beforeAll(async () => {
  ({ target, node } = await startTargetWithNode());
});
afterAll(async () => {
  await target?.stop();
  await node?.stop();
});

/** Listens on SILENT_HOST:port; every connection is held and never answered (after TLS, if `tls`). */
async function silentEndpoint(port: number, tls: boolean) {
  const sockets: Socket[] = [];
  const events: string[] = [];
  let server: Server;
  const hold = (s: Socket) => {
    sockets.push(s);
    events.push('silent endpoint: connection');
    s.on('error', () => {});
    s.once('close', () => events.push('silent endpoint: connection closed by the node'));
  };
  if (tls) {
    const id = await createTlsIdentity(clock);
    server = createTlsServer(
      { key: id.keyPem, cert: id.certPem, minVersion: 'TLSv1.3', ALPNProtocols: ['h2'] },
      hold,
    );
  } else server = createServer(hold);
  await new Promise<void>((r) => server.listen(port, SILENT_HOST, () => r()));
  return {
    events,
    connections: () => sockets.length,
    close: () => {
      for (const s of sockets) s.destroy();
      return new Promise<void>((r) => server.close(() => r()));
    },
  };
}

/** Records each call's start and end (with the error) into `events`. */
function recording(
  inner: JoinTicketClient,
  events: string[],
  errors: Map<string, unknown>,
): JoinTicketClient {
  return {
    async issueJoinTicket(
      endpoint: string,
      request: JoinTicketRequest,
      options?: CallOptions,
    ): Promise<JoinTicket> {
      events.push(`call ${endpoint}`);
      try {
        const t = await inner.issueJoinTicket(endpoint, request, options);
        events.push(`ticket from ${endpoint}`);
        return t;
      } catch (err) {
        events.push(`failed ${endpoint}`);
        errors.set(endpoint, err);
        throw err;
      }
    },
    issueRejoinTicket: (e, r, o) => inner.issueRejoinTicket(e, r, o),
  };
}

describe('join flow with a stalling endpoint listed first', () => {
  for (const tls of [false, true]) {
    it(`${tls ? 'an endpoint that completes TLS and then stays silent' : 'a silent TCP endpoint'} (the load balancer) is given up at the handshake deadline and the control plane answers`, async () => {
      const silent = await silentEndpoint(target.port, tls);
      try {
        const s = joinFlowStubs();
        s.metadata.selfValue = {
          name: DEFAULT_NODE.name,
          providerId: 'qemu:///worker-0',
          role: 'Worker',
          vpcIp: DEFAULT_NODE.ip,
        };
        s.metadata.lbValue = { host: SILENT_HOST, port: '6443' };
        s.metadata.listValue = [
          { name: 'control-plane-0', providerId: 'cp-0', role: 'ControlPlane', vpcIp: '127.0.0.1' },
        ];
        const events = silent.events;
        const errors = new Map<string, unknown>();
        const joinClient = recording(
          new GrpcJoinTicketClient({
            issuer: node.issuer,
            clock,
            localAddress: DEFAULT_NODE.ip,
            tlsHandshakeTimeoutMs: 1_000,
            connectTimeoutMs: 3_000,
          }),
          events,
          errors,
        );
        const flow = new JoinFlow(
          { ...s, clock, joinClient, csrFactory: new X509CsrFactory() },
          {
            joinServicePort: target.port,
            timeouts: { metadataMs: 5_000, joinTicketMs: 30_000, joinClusterMs: 5_000 },
          },
        );
        expect(await flow.run()).toEqual({ outcome: 'joined' });
        const silentEp = `${SILENT_HOST}:${target.port}`;
        const honestEp = `127.0.0.1:${target.port}`;
        expect(
          events.filter((e) => e.startsWith('call') || e.startsWith('failed') || e.startsWith('ticket')),
        ).toEqual([`call ${silentEp}`, `failed ${silentEp}`, `call ${honestEp}`, `ticket from ${honestEp}`]);
        // Given up at the connect/handshake deadline, not at the 30 s call deadline.
        const err = errors.get(silentEp) as Error;
        expect(err.message).toMatch(
          tls ? /no attested connection within 3000 ms/ : /no completed TLS handshake within 1000 ms/,
        );
        expect(err.message).not.toMatch(/deadline|30000/i);
        // One connection to the silent endpoint, which the node itself closed before asking the next.
        expect(silent.connections()).toBe(1);
        expect(events.indexOf('silent endpoint: connection closed by the node')).toBeLessThan(
          events.indexOf(`ticket from ${honestEp}`),
        );
        expect(s.clock.sleeps ?? []).toEqual([]);
      } finally {
        await silent.close();
      }
    });
  }
});
