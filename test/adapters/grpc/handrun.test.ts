/**
 * The hand-run session of issue 3, end to end with real parts: a join server over attested TLS on
 * 127.0.0.1 validating `qemu-vtpm` (pure-TypeScript vTPM validator), an honest node quoting with a
 * real swtpm, then forged nodes: one whose measurements differ (PCR 4 extended with another image),
 * one that replays the honest node's attestation on its own connection, one that attests with a
 * fake issuer OID. Each forged node is refused with a reason naming the failed check.
 *
 * Run by hand to see the transcript:  ATLS_HANDRUN=1 npx vitest run test/adapters/grpc/handrun.test.ts
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createQemuVtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import type { AttestedGrpcServer } from '../../../src/adapters/grpc/attested-server.js';
import { GrpcJoinTicketClient } from '../../../src/adapters/grpc/join-client.js';
import { createJoinServer } from '../../../src/adapters/grpc/join-server.js';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { createValidator } from '../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../src/domain/measurements.js';
import { type AttestationError, isAttestationError } from '../../../src/ports/errors.js';
import type { Issuer } from '../../../src/ports/issuer.js';
import type { JoinTicketRequest } from '../../../src/ports/types.js';
import { DummyIssuer } from '../../support/dummy-attestation.js';
import { joinCallOf } from '../../support/join-call.js';
import { clock, ReplayingIssuer, sampleTicket } from './helpers.js';

const say = process.env.ATLS_HANDRUN ? (line: string) => console.log(line) : () => {};

const request: JoinTicketRequest = {
  diskUuid: 'c0ffee00-0000-4000-8000-000000000001',
  certificateRequest: new Uint8Array([0x30]),
  isControlPlane: false,
  hostPublicKey: new Uint8Array(0),
  hostCertificatePrincipals: [],
};

/** Wraps an issuer and keeps the last document (what a network observer could capture). */
class Capturing implements Issuer {
  last: Uint8Array | undefined;
  constructor(private readonly inner: Issuer) {}
  get variant() {
    return this.inner.variant;
  }
  get oid() {
    return this.inner.oid;
  }
  async issue(userData: Uint8Array, nonce: Uint8Array): Promise<Uint8Array> {
    this.last = await this.inner.issue(userData, nonce);
    return this.last;
  }
}

describe('hand-run: attested node joins, forged nodes are refused with the failed check', () => {
  const swtpms: SwtpmInstance[] = [];
  let server: AttestedGrpcServer;
  let endpoint: string;
  let tickets = 0;
  let honest: Capturing;
  let tampered: Issuer;

  beforeAll(async () => {
    const [a, b] = await Promise.all([startSwtpm(), startSwtpm()]);
    swtpms.push(a!, b!);
    const tpmA = new Tpm2ToolsTpm({ tcti: a!.tcti });
    const tpmB = new Tpm2ToolsTpm({ tcti: b!.tcti });
    // The policy is what the honest node's image measures: its PCRs 4 and 15 as they are now.
    const pcrs = await tpmA.readPcrs([4, 15]);
    const policy = new MeasurementsPolicy(
      new Map([...pcrs].map(([i, v]) => [i, { expected: Buffer.from(v), warnOnly: false }] as const)),
    );
    // The forged node booted another image: PCR 4 carries a different measurement.
    await tpmB.pcrEvent(4, createHash('sha256').update('evil image').digest());
    honest = new Capturing(createQemuVtpmIssuer(tpmA));
    tampered = createQemuVtpmIssuer(tpmB);
    server = createJoinServer({
      validators: [createValidator('qemu-vtpm', { policy })],
      clock,
      handshakeTimeoutMs: 20_000,
      joinCall: joinCallOf({
        async issueJoinTicket(_r, ctx) {
          tickets++;
          say(
            `  join service: ticket issued to ${ctx.peer} (${ctx.variant}; checks: ${ctx.attestation.checks.map((c) => c.name).join(', ')})`,
          );
          return sampleTicket();
        },
        async issueRejoinTicket() {
          throw new Error('unused');
        },
      }),
    });
    server.tls.onRefused = (address, reason) =>
      say(
        `  join service: refused ${address}: ${isAttestationError(reason) ? `[${reason.check}] ` : ''}${reason.message}`,
      );
    endpoint = `127.0.0.1:${await server.listen('127.0.0.1', 0)}`;
    say(`join service listening on ${endpoint} (attested TLS, validator qemu-vtpm, PCRs 4 and 15 enforced)`);
  });

  afterAll(async () => {
    await server?.shutdown(200);
    await Promise.all(swtpms.map((s) => s.stop()));
  });

  async function join(name: string, issuer: Issuer) {
    say(`${name} connects`);
    const client = new GrpcJoinTicketClient({ issuer, clock, handshakeTimeoutMs: 20_000 });
    const result = await client.issueJoinTicket(endpoint, request).catch((e: unknown) => e);
    if (isAttestationError(result)) say(`  ${name}: REFUSED [${result.check}] ${result.message}`);
    else if (result instanceof Error) say(`  ${name}: FAILED ${result.message}`);
    else say(`  ${name}: joined, got a ticket (token ${(result as { token: string }).token.slice(0, 6)}…)`);
    return result;
  }

  it('an attested node (real swtpm quote bound to its TLS session) gets a ticket', async () => {
    const t = await join('honest node (swtpm A)', honest);
    expect(t).toMatchObject({ token: 'abcdef.0123456789abcdef' });
    expect(tickets).toBe(1);
  });

  it('a node with other measurements is refused, naming the PCR but no value', async () => {
    const e = (await join('forged node (swtpm B, other image)', tampered)) as AttestationError;
    expect(isAttestationError(e)).toBe(true);
    expect(e.check).toBe('measurements');
    expect(e.message).toMatch(/refused by the peer \(check measurements\): measurements: PCR 4(, PCR \d+)*$/);
    expect(e.message).not.toMatch(/[0-9a-f]{16}/);
    expect(tickets).toBe(1);
  });

  it('a node replaying the honest node’s captured attestation is refused (session binding)', async () => {
    const captured = honest.last!;
    const e = (await join(
      'replaying node',
      new ReplayingIssuer(() => captured, 'qemu-vtpm'),
    )) as AttestationError;
    expect(isAttestationError(e)).toBe(true);
    expect(e.check).toBe('extra-data');
    expect(e.message).toMatch(/refused by the peer \(check extra-data\)/);
    expect(tickets).toBe(1);
  });

  it('a node with a fake issuer OID is refused (unknown-oid)', async () => {
    const e = (await join('fake-issuer node (dummy OID)', new DummyIssuer())) as AttestationError;
    expect(e.check).toBe('unknown-oid');
    expect(tickets).toBe(1);
  });
});
