/**
 * Attacks on attested TLS against a real join server (grpc-js behind the aTLS listener) on
 * 127.0.0.1: replayed and relayed (man-in-the-middle) attestations, plaintext and non-attesting
 * TLS clients, oversized, truncated and garbage frames, silent clients. Every case asserts that no
 * handler ran and that the refusal names the failed check.
 */
import { createServer as createTlsServer, type TLSSocket } from 'node:tls';
import { ChannelCredentials, Metadata, status } from '@grpc/grpc-js';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createTlsIdentity } from '../../../src/adapters/grpc/atls/certificate.js';
import {
  encodeAttestationFrame,
  encodeVerdictFrame,
  FRAME_HEADER_BYTES,
  FrameReader,
} from '../../../src/adapters/grpc/atls/protocol.js';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { GrpcJoinTicketClient } from '../../../src/adapters/grpc/join-client.js';
import { createJoinServer } from '../../../src/adapters/grpc/join-server.js';
import { APIClient as JoinAPIClient } from '../../../src/gen/join.js';
import { isAttestationError } from '../../../src/ports/errors.js';
import type { JoinTicketRequest } from '../../../src/ports/types.js';
import type { Validator } from '../../../src/ports/validator.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { joinCallOf } from '../../support/join-call.js';
import {
  clock,
  NonceIgnoringValidator,
  RecordingIssuer,
  ReplayingIssuer,
  rawTlsClient,
  readVerdict,
  sampleTicket,
} from './helpers.js';

const request: JoinTicketRequest = {
  diskUuid: 'c0ffee00-0000-4000-8000-000000000001',
  certificateRequest: new Uint8Array([0x30, 0x82]),
  isControlPlane: false,
  hostPublicKey: new Uint8Array(0),
  hostCertificatePrincipals: [],
};

let server: AttestedGrpcServer;
let port: number;
let handlerCalls: number;
let refusals: Array<{ address: string; reason: Error }>;
let dropped: Array<{ address: string; reason: string }>;
let validator: DummyValidator;

async function startServer(validators?: Validator[]): Promise<void> {
  handlerCalls = 0;
  refusals = [];
  validator = new DummyValidator();
  server = createJoinServer({
    validators: validators ?? [validator],
    clock,
    handshakeTimeoutMs: 1500,
    joinCall: joinCallOf({
      async issueJoinTicket() {
        handlerCalls++;
        return sampleTicket();
      },
      async issueRejoinTicket() {
        handlerCalls++;
        return { stateDiskKey: new Uint8Array(32), measurementSecret: new Uint8Array(32) };
      },
    }),
  });
  server.tls.onRefused = (address, reason) => refusals.push({ address, reason });
  dropped = [];
  server.tls.onDropped = (address, reason) => dropped.push({ address, reason });
  port = await server.listen('127.0.0.1', 0);
}

/** Waits (bounded) until the server logged `n` refusals. */
/** Waits (bounded: 5 s) until `cond` holds. */
async function until(cond: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
}

async function refused(n = 1): Promise<Array<{ address: string; reason: Error }>> {
  for (let i = 0; i < 200 && refusals.length < n; i++) await new Promise((r) => setTimeout(r, 10));
  return refusals;
}

/** Resolves when `socket` has closed (errors such as EPIPE are expected on the way). */
function closed(socket: TLSSocket): Promise<void> {
  if (socket.destroyed) return Promise.resolve();
  socket.resume();
  return new Promise((resolve) => socket.once('close', () => resolve()));
}

function checkOfError(e: unknown): string | undefined {
  return isAttestationError(e) ? e.check : undefined;
}

beforeEach(() => startServer());
afterEach(() => server.shutdown(200));

describe('session binding', () => {
  it('an attestation replayed on another connection is refused (nonce)', async () => {
    const recorder = new RecordingIssuer();
    const honest = new GrpcJoinTicketClient({ issuer: recorder, clock });
    await honest.issueJoinTicket(`127.0.0.1:${port}`, request);
    expect(handlerCalls).toBe(1);
    expect(recorder.issued).toHaveLength(1);

    const replayer = new GrpcJoinTicketClient({
      issuer: new ReplayingIssuer(() => recorder.issued[0]!),
      clock,
    });
    const err = await replayer.issueJoinTicket(`127.0.0.1:${port}`, request).catch((e: unknown) => e);
    expect(checkOfError(err)).toBe('nonce');
    expect((err as Error).message).toContain('issuing join ticket from 127.0.0.1');
    expect(handlerCalls).toBe(1);
  });

  it('an attestation relayed through a man in the middle is refused (nonce), and user-data if the validator skipped the nonce', async () => {
    for (const [validators, expected] of [
      [[new DummyValidator()], 'nonce'],
      [[new NonceIgnoringValidator()], 'user-data'],
    ] as const) {
      await server.shutdown(100);
      await startServer([...validators]);
      // The MITM terminates the node's TLS with its own certificate and relays the node's
      // attestation frame, byte for byte, on its own TLS connection to the join service.
      const mitmId = await createTlsIdentity(clock);
      const mitm = createTlsServer({
        key: mitmId.keyPem,
        cert: mitmId.certPem,
        ALPNProtocols: ['h2'],
        minVersion: 'TLSv1.3',
        requestCert: true,
        rejectUnauthorized: false,
      });
      const relayed = new Promise<unknown>((resolve) => {
        mitm.once('secureConnection', async (victim: TLSSocket) => {
          victim.on('error', () => {});
          const fromVictim = new FrameReader(victim);
          const attestation = await fromVictim.next();
          const upstream = await rawTlsClient(port);
          if (attestation.type !== 0x01) throw new Error('expected attestation');
          upstream.socket.write(encodeAttestationFrame(attestation.oid, attestation.document));
          const verdict = await readVerdict(upstream.frames);
          victim.destroy();
          upstream.socket.destroy();
          resolve(verdict);
        });
      });
      await new Promise<void>((r) => mitm.listen(0, '127.0.0.1', () => r()));
      const mitmPort = (mitm.address() as { port: number }).port;
      const victim = new GrpcJoinTicketClient({ issuer: new DummyIssuer(), clock, defaultTimeoutMs: 5000 });
      const victimResult = victim.issueJoinTicket(`127.0.0.1:${mitmPort}`, request).catch((e: unknown) => e);
      const verdict = (await relayed) as { accepted?: boolean; check?: string };
      expect(verdict.accepted).toBe(false);
      expect(verdict.check).toBe(expected);
      expect((await refused())[0]?.reason.message).toBeTruthy();
      expect(checkOfError(refusals[0]?.reason)).toBe(expected);
      await victimResult;
      mitm.close();
      expect(handlerCalls).toBe(0);
    }
  });
});

describe('clients that do not attest never reach a handler', () => {
  it('a plaintext gRPC client is refused before any handler runs', async () => {
    const client = new JoinAPIClient(`127.0.0.1:${port}`, ChannelCredentials.createInsecure());
    const err = await new Promise<{ code?: number }>((resolve) => {
      client.issueJoinTicket(
        {
          diskUuid: 'x',
          certificateRequest: Buffer.alloc(0),
          isControlPlane: false,
          hostPublicKey: Buffer.alloc(0),
          hostCertificatePrincipals: [],
        },
        (e) => resolve(e ?? {}),
      );
    });
    client.close();
    expect(err.code).toBe(status.UNAVAILABLE);
    expect(handlerCalls).toBe(0);
    expect((await refused())[0]?.reason.message).toMatch(/TLS handshake failed/);
  });

  it('a TLS gRPC client without attestation is refused before any handler runs', async () => {
    const client = new JoinAPIClient(
      `127.0.0.1:${port}`,
      ChannelCredentials.createSsl(null, null, null, { rejectUnauthorized: false }),
    );
    const err = await new Promise<{ code?: number }>((resolve) => {
      client.issueJoinTicket(
        {
          diskUuid: 'x',
          certificateRequest: Buffer.alloc(0),
          isControlPlane: false,
          hostPublicKey: Buffer.alloc(0),
          hostCertificatePrincipals: [],
        },
        new Metadata(),
        { deadline: new Date(Date.now() + 5000) },
        (e) => resolve(e ?? {}),
      );
    });
    client.close();
    expect(err.code).toBe(status.UNAVAILABLE);
    expect(handlerCalls).toBe(0);
    const [r] = await refused();
    expect(checkOfError(r?.reason)).toBe('frame-format');
    expect(r?.reason.message).toContain('bad frame magic');
  });

  it('a TLS client that sends "no attestation" is refused with attestation-missing', async () => {
    const { socket, frames } = await rawTlsClient(port);
    socket.write(encodeAttestationFrame('', new Uint8Array(0)));
    const verdict = await readVerdict(frames);
    expect(verdict).toMatchObject({ accepted: false, check: 'attestation-missing' });
    socket.destroy();
    expect(handlerCalls).toBe(0);
  });

  it('a TLS client that stays silent is dropped at the handshake timeout (a drop, not a refusal)', async () => {
    const before = refusals.length;
    const { socket } = await rawTlsClient(port);
    await closed(socket);
    await until(() => dropped.length > 0);
    expect(dropped).toEqual([expect.objectContaining({ reason: 'handshake-timeout' })]);
    expect(refusals).toHaveLength(before);
    expect(handlerCalls).toBe(0);
  });
});

describe('malformed frames', () => {
  async function sendAndGetVerdict(bytes: Buffer, end = false) {
    const { socket, frames } = await rawTlsClient(port);
    if (end) socket.end(bytes);
    else socket.write(bytes);
    const verdict = await readVerdict(frames);
    socket.destroy();
    return verdict;
  }

  it('an oversized (10 MB) attestation frame is refused from its header, without buffering it', async () => {
    const { socket, frames } = await rawTlsClient(port);
    const header = encodeAttestationFrame(validator.oid, new Uint8Array(0)).subarray(0, FRAME_HEADER_BYTES);
    header.writeUInt32BE(10 * 1024 * 1024, 6);
    socket.write(header);
    // The verdict arrives although not one body byte was sent: the server decided from the header.
    const verdict = await readVerdict(frames);
    expect(verdict).toMatchObject({ accepted: false, check: 'frame-size' });
    // Pushing the 10 MB anyway ends in a closed connection, not in a validator call.
    socket.write(Buffer.alloc(10 * 1024 * 1024, 0x41));
    await closed(socket);
    expect(validator.calls).toHaveLength(0);
    expect(handlerCalls).toBe(0);
  });

  it('garbage instead of a frame is refused (bad magic)', async () => {
    const verdict = await sendAndGetVerdict(Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
    // The peer is told the check only; the detail stays with the refusing side.
    expect(verdict).toMatchObject({ accepted: false, check: 'frame-format', reason: 'frame-format' });
    const [r] = await refused();
    expect(r?.reason.message).toContain('bad frame magic');
  });

  it('a wrong protocol version is refused', async () => {
    const frame = encodeAttestationFrame(validator.oid, new Uint8Array([1]));
    frame.writeUInt8(9, 4);
    expect(await sendAndGetVerdict(frame)).toMatchObject({
      check: 'frame-format',
      reason: 'frame-format',
    });
    const [r] = await refused();
    expect(r?.reason.message).toContain('version 9');
  });

  it('an unknown frame type is refused', async () => {
    const frame = encodeAttestationFrame(validator.oid, new Uint8Array([1]));
    frame.writeUInt8(0x7f, 5);
    expect(await sendAndGetVerdict(frame)).toMatchObject({
      check: 'frame-format',
      reason: 'frame-format',
    });
    const [r] = await refused();
    expect(r?.reason.message).toContain('0x7f');
  });

  it('a truncated frame (connection closed inside the body) is refused', async () => {
    const frame = encodeAttestationFrame(validator.oid, new Uint8Array(100));
    const verdict = await sendAndGetVerdict(frame.subarray(0, frame.length - 40), true);
    // The server may not be able to answer a half-closed peer; either way the reason is logged.
    if (!(verdict instanceof Error)) expect(verdict).toMatchObject({ accepted: false });
    const [r] = await refused();
    expect(r?.reason.message).toContain('connection closed inside the frame body');
    expect(handlerCalls).toBe(0);
  });

  it('a garbage document under a known OID is refused by the validator', async () => {
    const verdict = await sendAndGetVerdict(
      encodeAttestationFrame(validator.oid, new Uint8Array([0xff, 0x00, 0x13])),
    );
    expect(verdict).toMatchObject({ accepted: false, check: 'document-format' });
  });

  it('a malformed OID is refused', async () => {
    const frame = encodeAttestationFrame('1.3.9900.1.1', new Uint8Array([1]));
    frame.write('x', FRAME_HEADER_BYTES + 1, 'latin1');
    expect(await sendAndGetVerdict(frame)).toMatchObject({ check: 'frame-format' });
  });

  it('a verdict instead of an attestation is refused', async () => {
    expect(await sendAndGetVerdict(encodeVerdictFrame(true))).toMatchObject({
      accepted: false,
      check: 'frame-format',
    });
  });
});
