/**
 * Attack clients for the attack suite: a join (or rejoin) call over attested TLS with a given
 * issuer and clock, made with grpc-js directly so the exact gRPC status code is visible together
 * with the attested TLS refusal the connection ended in; plaintext and plain-TLS gRPC clients; a
 * raw TLS client that speaks the aTLS frames by hand; and a man in the middle that relays frames
 * between a victim node and the join service. Plus the assertions every case shares: the status,
 * the refusal, nothing issued, and the audit event. Test code only.
 */
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { type TLSSocket, createServer as tlsCreateServer } from 'node:tls';
import { ChannelCredentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { expect } from 'vitest';
import { createTlsIdentity } from '../../../src/adapters/grpc/atls/certificate.js';
import { AttestedChannelCredentials } from '../../../src/adapters/grpc/atls/credentials.js';
import {
  encodeAttestationFrame,
  encodeVerdictFrame,
  FRAME_ATTESTATION,
  FRAME_VERDICT,
  type Frame,
  FrameReader,
} from '../../../src/adapters/grpc/atls/protocol.js';
import { joinRequestToProto } from '../../../src/adapters/grpc/mapping.js';
import { X509CsrFactory } from '../../../src/adapters/pki/x509-csr-factory.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { APIClient as JoinAPIClient } from '../../../src/gen/join.js';
import type { Clock } from '../../../src/ports/clock.js';
import { isAttestationError, refusalReasonCode } from '../../../src/ports/errors.js';
import type { Issuer } from '../../../src/ports/issuer.js';
import type { JoinTicketRequest } from '../../../src/ports/types.js';
import { rawTlsClient, readVerdict } from '../../support/raw-atls-client.js';
import type { Issued, Target } from './target.js';

/** The system clock. */
export const clock = new SystemClock();

/** A clock `offsetMs` away from the system clock (an attester whose certificate is out of date). */
export function offsetClock(offsetMs: number): Clock {
  return {
    now: () => new Date(Date.now() + offsetMs),
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
  };
}

/**
 * Attested TLS credentials that remember every connection grpc-js opened through them (the local
 * address and port are what the join service's audit event calls the peer) and when each attested
 * TLS exchange settled. After the call, `finish()` (the production credentials') stops grpc-js's
 * background reconnect, so one attempt is one connection.
 */
export class TrackingCredentials extends AttestedChannelCredentials {
  /** Local `address:port` of the connections made, in order. */
  readonly peers: string[] = [];
  private readonly settled: Promise<unknown>[] = [];

  override _createSecureConnector(
    ...args: Parameters<AttestedChannelCredentials['_createSecureConnector']>
  ): ReturnType<AttestedChannelCredentials['_createSecureConnector']> {
    const inner = super._createSecureConnector(...args);
    return {
      ...inner,
      connect: (socket: Socket) => {
        const remember = () => {
          if (socket.localPort !== undefined) this.peers.push(`${socket.localAddress}:${socket.localPort}`);
        };
        if (socket.connecting) socket.once('connect', remember);
        else remember();
        const result = inner.connect(socket);
        this.settled.push(result.catch(() => undefined));
        return result;
      },
    };
  }

  /** Resolves once every connection attempt so far has passed or failed its attested TLS exchange. */
  async allSettled(): Promise<void> {
    for (let n = 0; n !== this.settled.length; ) {
      n = this.settled.length;
      await Promise.all(this.settled);
    }
  }
}

/** What one attack attempt observed. */
export interface Outcome {
  /** gRPC status of the call (status.OK when a ticket came back). */
  code: status;
  /** Status details (or "OK"). */
  details: string;
  /**
   * Why the attested TLS connection failed, as the attacker's side saw it (for a refusal by the
   * join service: an AttestationError carrying the service's failed check), if it failed.
   */
  refusal: Error | undefined;
  /** The response when the call succeeded. */
  response: unknown;
  /** Local `address:port` of the attested TLS connections grpc-js made for the call (empty for plain transports). */
  peers: string[];
}

/** The failed check named by an AttestationError, or undefined. */
export function checkOf(err: unknown): string | undefined {
  return isAttestationError(err) ? err.check : undefined;
}

const csrs = new X509CsrFactory();

/**
 * A cluster instance in the target's metadata (the join service's PeerIdentity): its name, its VPC
 * IP (the loopback address it connects from) and its role.
 */
export interface Instance {
  name: string;
  ip: string;
  role: 'ControlPlane' | 'Worker';
  /** The cloud's immutable instance ID, for clouds that have one (absent: like QEMU). */
  instanceId?: string;
}

/** The first control plane (where the simulated cluster was initialised). */
export const CONTROL_PLANE_0: Instance = { name: 'control-plane-0', ip: '127.0.0.2', role: 'ControlPlane' };
/** The node attempts come from by default: a worker of the cluster on 127.0.0.1. */
export const DEFAULT_NODE: Instance = { name: 'worker-0', ip: '127.0.0.1', role: 'Worker' };

/** A join request for `nodeName` with a real kubelet CSR (IP SANs `ips`) and a fresh disk UUID. */
export async function joinRequest(
  nodeName: string,
  ips: string[] = [DEFAULT_NODE.ip],
  diskUuid: string = randomUUID(),
): Promise<JoinTicketRequest> {
  const csr = await csrs.create(nodeName, ips);
  return {
    diskUuid,
    certificateRequest: csr.csrDer,
    isControlPlane: false,
    hostPublicKey: new Uint8Array(0),
    hostCertificatePrincipals: [],
  };
}

/** upstream's malicious-join request: every field empty. */
export const EMPTY_REQUEST: JoinTicketRequest = {
  diskUuid: '',
  certificateRequest: new Uint8Array(0),
  isControlPlane: false,
  hostPublicKey: new Uint8Array(0),
  hostCertificatePrincipals: [],
};

/** Options of {@link attempt}. */
export interface AttemptOptions {
  /** The attacker's clock (its TLS certificate's validity follows it). Default: system clock. */
  clock?: Clock;
  /**
   * The cluster instance (or any machine) the attempt comes from: the connection leaves from its
   * address. Default {@link DEFAULT_NODE} (127.0.0.1).
   */
  from?: Instance;
  /** The join request (default: an honest request of `from`: its name and address). */
  request?: JoinTicketRequest;
  /** Ask for a rejoin ticket for this disk UUID instead. */
  rejoinDiskUuid?: string;
  /** Plain credentials instead of attested TLS: `plaintext` or `tls` (TLS without attestation). */
  transport?: 'plaintext' | 'tls';
}

/**
 * Calls IssueJoinTicket (or IssueRejoinTicket) on `endpoint` with grpc-js, attesting with `issuer`
 * (undefined = an attested TLS client that sends "no attestation"). Waits until every connection
 * grpc-js opened for the call has finished its attested TLS exchange. Never throws for a refusal.
 */
export async function attempt(
  endpoint: string,
  issuer: Issuer | undefined,
  options: AttemptOptions = {},
): Promise<Outcome> {
  const from = options.from ?? DEFAULT_NODE;
  const credentials =
    options.transport === 'plaintext'
      ? ChannelCredentials.createInsecure()
      : options.transport === 'tls'
        ? ChannelCredentials.createSsl(null, null, null, { rejectUnauthorized: false })
        : new TrackingCredentials({
            ...(issuer ? { issuer } : {}),
            clock: options.clock ?? clock,
            handshakeTimeoutMs: 10_000,
            localAddress: from.ip,
          });
  const target = credentials instanceof TrackingCredentials ? credentials.target(endpoint) : endpoint;
  const client = new JoinAPIClient(target, credentials, { 'grpc.use_local_subchannel_pool': 1 });
  const request = options.request ?? (await joinRequest(from.name, [from.ip]));
  try {
    const { err, res } = await new Promise<{ err: ServiceError | null; res: unknown }>((resolve) => {
      const meta = new Metadata();
      const opts = { deadline: new Date(Date.now() + 15_000) };
      if (options.rejoinDiskUuid !== undefined)
        client.issueRejoinTicket({ diskUuid: options.rejoinDiskUuid }, meta, opts, (e, r) =>
          resolve({ err: e, res: r }),
        );
      else
        client.issueJoinTicket(joinRequestToProto(request), meta, opts, (e, r) =>
          resolve({ err: e, res: r }),
        );
    });
    const tracked = credentials instanceof TrackingCredentials ? credentials : undefined;
    tracked?.finish();
    await tracked?.allSettled();
    const common = { refusal: tracked?.refusal(), peers: tracked ? [...tracked.peers] : [] };
    if (err) return { code: err.code, details: err.details, response: undefined, ...common };
    return { code: status.OK, details: 'OK', response: res, ...common };
  } finally {
    client.close();
  }
}

/** Waits (bounded, 5 s) until `cond` holds for the target's audit events; returns them. */
export async function waitForAudits(
  target: Target,
  cond: (audits: Array<Record<string, unknown>>) => boolean,
  what: string,
): Promise<Array<Record<string, unknown>>> {
  const until = Date.now() + 5_000;
  for (;;) {
    const audits = target.audits();
    if (cond(audits)) return audits;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Snapshot before an attack, for {@link expectRefused}. */
export interface Before {
  issued: Issued;
  audits: number;
}

/** Takes the snapshot {@link expectRefused} compares against. */
export function snapshot(target: Target): Before {
  return { issued: target.issued(), audits: target.audits().length };
}

/** What a refusal must look like. */
export interface Expected {
  /** Exact gRPC status code the attacker's call ends with. */
  code: status;
  /**
   * The check the attested TLS layer refused with (the service's deny verdict, as the attacker saw
   * it); undefined when the connection was attested and a handler refused.
   */
  check?: string;
  /** The audit event's `rpc` (default `attested-tls` when `check` is set, else `IssueJoinTicket`). */
  rpc?: string;
  /** The audit event's `reason` (default the reason code of `check`). */
  reason?: string;
  /** The audit event's `code` (default `permission-denied`). */
  auditCode?: string;
}

/**
 * Asserts the exact refusal: status code, the aTLS check (when connection-level), nothing issued
 * (no key-service call, no bootstrap token, no kubelet certificate), and the audit events of this
 * attack — one per connection it made, every one `refused` with the expected rpc, code and reason.
 * Returns those events.
 */
export async function expectRefused(
  target: Target,
  since: Before,
  outcome: Outcome,
  expected: Expected,
): Promise<Array<Record<string, unknown>>> {
  expect(outcome.code, `status (details: ${outcome.details})`).toBe(expected.code);
  if (expected.check !== undefined) {
    expect(checkOf(outcome.refusal), `refusal: ${outcome.refusal?.message}`).toBe(expected.check);
    // The verdict names the failed check only (for measurements, the registers that differ): no
    // value, bound or detail an attacker could tune a forgery to.
    expect(outcome.refusal?.message).toMatch(
      new RegExp(
        `^refused by the peer \\(check ${expected.check}\\): ${expected.check}(: (PCR \\d+|MRTD|RTMR \\d)(, (PCR \\d+|MRTD|RTMR \\d))*)?$`,
      ),
    );
  } else {
    expect(outcome.refusal, `refusal: ${outcome.refusal?.message}`).toBeUndefined();
  }
  return expectAuditedRefusal(target, since, {
    rpc: expected.rpc ?? (expected.check !== undefined ? 'attested-tls' : 'IssueJoinTicket'),
    reason: expected.reason ?? refusalReasonCode(expected.check as string),
    ...(expected.check !== undefined ? { check: expected.check } : {}),
    code: expected.auditCode ?? 'permission-denied',
    peers: outcome.peers,
  });
}

/** Audit events whose peer is one of `peers` (`address:port`). */
function auditsOf(audits: Array<Record<string, unknown>>, peers: string[]): Array<Record<string, unknown>> {
  const set = new Set(peers);
  return audits.filter((a) => set.has(String(a.peer)));
}

/**
 * Asserts that nothing was issued since `since` (no key-service call, no bootstrap token, no kubelet
 * certificate) and that the attack's audit events are refusals with `rpc`, `code` (default
 * permission-denied) and `reason`. With `peers` (`address:port` of the connections the attack made)
 * or `ports` (local ports on 127.0.0.1) the events are those of exactly these connections, one
 * each; without, every event since `since` (at least one).
 */
export async function expectAuditedRefusal(
  target: Target,
  since: Before,
  expected: {
    rpc: string;
    reason: string;
    check?: string;
    code?: string;
    ports?: number[];
    peers?: string[];
  },
): Promise<Array<Record<string, unknown>>> {
  const peers = [...(expected.peers ?? []), ...(expected.ports ?? []).map((p) => `127.0.0.1:${p}`)];
  // Only events since `since`: the OS may give a new connection the local port of an earlier one.
  const fresh = (a: Array<Record<string, unknown>>) => a.slice(since.audits);
  const mine =
    peers.length > 0
      ? auditsOf(
          fresh(
            await waitForAudits(
              target,
              (a) => auditsOf(fresh(a), peers).length >= peers.length,
              `one audit event per connection (${peers.join(', ')})`,
            ),
          ),
          peers,
        )
      : fresh(await waitForAudits(target, (a) => a.length > since.audits, 'an audit event'));
  if (peers.length > 0) expect(mine).toHaveLength(peers.length);
  for (const a of mine) {
    expect(a).toMatchObject({
      rpc: expected.rpc,
      outcome: 'refused',
      code: expected.code ?? 'permission-denied',
      reason: expected.reason,
      ...(expected.check !== undefined ? { check: expected.check } : {}),
    });
  }
  expect(target.issued()).toEqual(since.issued);
  return mine;
}

/** Asserts an honest join got a ticket, was audited as issued, and keys were derived (control case). */
export async function expectIssued(target: Target, since: Before, outcome: Outcome): Promise<void> {
  expect(outcome.code, `status (details: ${outcome.details}; refusal: ${outcome.refusal?.message})`).toBe(
    status.OK,
  );
  expect(outcome.peers).toHaveLength(1);
  // Only events since `since`: the OS may give a new connection the local port of an earlier one.
  const mine = auditsOf(
    (
      await waitForAudits(
        target,
        (a) => auditsOf(a.slice(since.audits), outcome.peers).length >= 1,
        'the issued audit event',
      )
    ).slice(since.audits),
    outcome.peers,
  );
  expect(mine.map((a) => [a.rpc, a.outcome])).toEqual([['IssueJoinTicket', 'issued']]);
  const now = target.issued();
  expect(now.kmsCalls).toBeGreaterThan(since.issued.kmsCalls);
  expect(now.tokens).toBe(since.issued.tokens + 1);
  expect(now.kubeletCerts).toBe(since.issued.kubeletCerts + 1);
}

/** Raw aTLS client helpers, shared with the aTLS adapter tests (test/support/raw-atls-client.ts). */
export { rawTlsClient, readVerdict };

/** Resolves once `socket` has closed (draining whatever arrives). */
export function closed(socket: TLSSocket): Promise<void> {
  if (socket.destroyed) return Promise.resolve();
  socket.resume();
  return new Promise((resolve) => socket.once('close', () => resolve()));
}

/**
 * A man in the middle on 127.0.0.1: terminates the victim's TLS with its own certificate, opens its
 * own TLS connection to the join service, and relays aTLS frames both ways byte for byte. Resolves
 * `verdict` with the service's verdict on the relayed attestation.
 */
export async function startRelay(servicePort: number): Promise<{
  port: number;
  verdict: Promise<Frame | Error>;
  close(): void;
}> {
  const id = await createTlsIdentity(clock);
  const sockets: TLSSocket[] = [];
  const mitm = tlsCreateServer({
    key: id.keyPem,
    cert: id.certPem,
    ALPNProtocols: ['h2'],
    minVersion: 'TLSv1.3',
    requestCert: true,
    rejectUnauthorized: false,
  });
  const verdict = new Promise<Frame | Error>((resolve) => {
    mitm.once('secureConnection', async (victim: TLSSocket) => {
      sockets.push(victim);
      victim.on('error', () => {});
      try {
        const fromVictim = new FrameReader(victim);
        const upstream = await rawTlsClient(servicePort);
        sockets.push(upstream.socket);
        // Relay the victim's attestation frame to the service as is.
        const attestation = await fromVictim.next();
        if (attestation.type !== FRAME_ATTESTATION) throw new Error('victim sent no attestation frame');
        upstream.socket.write(encodeAttestationFrame(attestation.oid, attestation.document));
        // Relay the service's frames back (its "no attestation" frame, then its verdict).
        const v = await readVerdictRelaying(upstream.frames, victim);
        resolve(v);
      } catch (err) {
        resolve(err instanceof Error ? err : new Error(String(err)));
      }
    });
  });
  await new Promise<void>((r) => mitm.listen(0, '127.0.0.1', () => r()));
  return {
    port: (mitm.address() as { port: number }).port,
    verdict,
    close: () => {
      for (const s of sockets) s.destroy();
      mitm.close();
    },
  };
}

async function readVerdictRelaying(frames: FrameReader, victim: TLSSocket): Promise<Frame | Error> {
  for (let i = 0; i < 3; i++) {
    const f = await frames.next().catch((e: Error) => e);
    if (f instanceof Error) return f;
    if (f.type === FRAME_VERDICT) {
      victim.write(encodeVerdictFrame(f.accepted, f.check, f.reason));
      return f;
    }
    victim.write(encodeAttestationFrame(f.oid, f.document));
  }
  return new Error('no verdict within three frames');
}
