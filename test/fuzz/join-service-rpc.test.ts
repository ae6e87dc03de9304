/**
 * Fuzzing the join service's requests (issue 7 §3, "every RPC request"): the real join service
 * (startJoinService through test/app/join-service/harness.ts: real attested TLS with the test-only
 * dummy attestation, the real key service and FileCertificateAuthority, SIMULATED Kubernetes) gets
 * IssueJoinTicket and IssueRejoinTicket requests over a real loopback connection: hand-encoded
 * protobuf with every field absent, repeated, edge-valued or huge, junk fields, random bytes, typed
 * requests whose CSR is a mutated real kubelet CSR, and 1–3 MB requests; and grpc.health.v1 Check
 * requests on the same attested port. Every call must end in a
 * status the service defines; INTERNAL only with a message from the service (never the generic
 * "internal error" of an unmapped exception); and the service must still issue a ticket to a valid
 * request afterwards.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { status } from '@grpc/grpc-js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AttestedChannelCredentials } from '../../src/adapters/grpc/atls/credentials.js';
import { X509CsrFactory } from '../../src/adapters/pki/x509-csr-factory.js';
import { SystemClock } from '../../src/adapters/system/system-clock.js';
import { IssueJoinTicketRequest, IssueJoinTicketResponse } from '../../src/gen/join.js';
import { type Harness, startHarness } from '../app/join-service/harness.js';
import { DummyIssuer } from '../support/dummy-attestation.js';
import { fuzzRuns, fuzzSeed, testTimeoutMs } from './harness/config.js';
import { type CallOutcome, RawGrpcClient, statusName } from './harness/grpc.js';
import { applyMutation, mutation } from './harness/mutate.js';
import {
  ISSUE_JOIN_TICKET_FIELDS,
  ISSUE_REJOIN_TICKET_FIELDS,
  WireRequest,
  wireRequest,
} from './harness/protobuf.js';

/** The harness lives for the whole file, so its temp dir is made and removed here. */
const dir = mkdtempSync(joinPath(tmpdir(), 'confboot-fuzz-join-'));
let h: Harness;
let join: RawGrpcClient;
let rejoin: RawGrpcClient;
let health: RawGrpcClient;
let csrDer: Uint8Array;
const clock = new SystemClock();

/** Statuses the join service defines for a bad, refused or unservable request. */
const DEFINED = new Set([
  status.OK,
  status.INVALID_ARGUMENT,
  status.PERMISSION_DENIED,
  status.FAILED_PRECONDITION,
  status.NOT_FOUND,
  status.RESOURCE_EXHAUSTED,
  status.INTERNAL,
]);

beforeAll(async () => {
  h = await startHarness(dir, { limits: { ratePerSecond: 0, maxConcurrent: 0 } });
  const creds = () => new AttestedChannelCredentials({ issuer: new DummyIssuer(), clock });
  join = new RawGrpcClient(h.endpoint, creds(), '/join.API/IssueJoinTicket');
  rejoin = new RawGrpcClient(h.endpoint, creds(), '/join.API/IssueRejoinTicket');
  health = new RawGrpcClient(h.endpoint, creds(), '/grpc.health.v1.Health/Check');
  // The caller's own address: the service may require the CSR's IPs to be the caller's.
  csrDer = (await new X509CsrFactory().create('fuzz-node', ['127.0.0.1'])).csrDer;
}, 60_000);
afterAll(async () => {
  join?.close();
  rejoin?.close();
  health?.close();
  await h?.stop();
  rmSync(dir, { recursive: true, force: true });
});

function checkOutcome(out: CallOutcome): void {
  const what = `${statusName(out.code)}: ${out.details}`;
  expect(DEFINED.has(out.code), `undefined status ${what}`).toBe(true);
  if (out.code === status.INTERNAL) {
    // toGrpcError's text for an exception that is not a ConfbootError.
    expect(out.details, `unmapped exception (${what})`).not.toMatch(/: internal error$/);
  }
  if (out.code !== status.OK) expect(out.details, what).not.toBe('');
}

async function validJoinWorks(): Promise<void> {
  const req = IssueJoinTicketRequest.encode({
    diskUuid: randomUUID(),
    certificateRequest: Buffer.from(csrDer),
    isControlPlane: false,
    hostPublicKey: Buffer.alloc(0),
    hostCertificatePrincipals: [],
  }).finish();
  const out = await join.call(req);
  expect(out.code, `service stopped serving: ${out.details}`).toBe(status.OK);
  const ticket = IssueJoinTicketResponse.decode(out.responses[0] ?? new Uint8Array());
  expect(ticket.stateDiskKey.length).toBe(32);
}

/** A typed request: the real CSR mutated or kept, edge disk UUIDs, control-plane flag, principals. */
const typedJoin = fc
  .record({
    csrSteps: fc.array(mutation, { maxLength: 3 }),
    diskUuid: fc.oneof(
      // Mostly valid, so the mutated CSR is what gets judged (the UUID is checked first).
      { weight: 6, arbitrary: fc.uuid() },
      { weight: 1, arbitrary: fc.constantFrom('', 'not-a-uuid', '../../etc', 'A'.repeat(300), '\u0000') },
      { weight: 1, arbitrary: fc.string({ maxLength: 40 }) },
    ),
    isControlPlane: fc.boolean(),
    principals: fc.array(fc.string({ maxLength: 20 }), { maxLength: 3 }),
    hostKey: fc.uint8Array({ maxLength: 40 }),
  })
  .map(
    (r) =>
      new WireRequest(
        IssueJoinTicketRequest.encode({
          diskUuid: r.diskUuid,
          certificateRequest: Buffer.from(r.csrSteps.reduce(applyMutation, csrDer)),
          isControlPlane: r.isControlPlane,
          hostPublicKey: Buffer.from(r.hostKey),
          hostCertificatePrincipals: r.principals,
        }).finish(),
      ),
  );

describe('join service requests under fuzzing (SIMULATED Kubernetes, dummy attestation)', () => {
  it(
    'IssueJoinTicket: structured, random and typed requests with mutated real CSRs get a defined status',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.oneof(wireRequest(ISSUE_JOIN_TICKET_FIELDS), typedJoin), async (req) => {
          checkOutcome(await join.call(req.bytes));
        }),
        { numRuns: fuzzRuns(200, 'heavy'), seed: fuzzSeed(), timeout: 20_000 },
      );
      await validJoinWorks();
    },
    testTimeoutMs(fuzzRuns(200, 'heavy'), 50),
  );

  it(
    'IssueRejoinTicket: structured and random requests get a defined status',
    async () => {
      await fc.assert(
        fc.asyncProperty(wireRequest(ISSUE_REJOIN_TICKET_FIELDS), async (req) => {
          checkOutcome(await rejoin.call(req.bytes));
        }),
        { numRuns: fuzzRuns(100, 'heavy'), seed: fuzzSeed(), timeout: 20_000 },
      );
      await validJoinWorks();
    },
    testTimeoutMs(fuzzRuns(100, 'heavy'), 50),
  );

  it(
    'grpc.health.v1 Check on the attested port: structured and random requests get OK, NOT_FOUND or INTERNAL',
    async () => {
      const fields = [{ no: 1, name: 'service', type: 'string' as const }];
      await fc.assert(
        fc.asyncProperty(wireRequest(fields), async (req) => {
          const out = await health.call(req.bytes);
          checkOutcome(out);
          expect(
            [status.OK, status.NOT_FOUND, status.INTERNAL],
            `${statusName(out.code)}: ${out.details}`,
          ).toContain(out.code);
        }),
        { numRuns: fuzzRuns(100, 'heavy'), seed: fuzzSeed(), timeout: 20_000 },
      );
      await validJoinWorks();
    },
    testTimeoutMs(fuzzRuns(100, 'heavy'), 50),
  );

  it(
    '1–3 MB requests (huge fields, near the 4 MiB message limit and over it)',
    async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            field: fc.constantFrom('csr', 'uuid', 'principals', 'host-key'),
            n: fc.integer({ min: 1 << 20, max: 3 << 20 }),
          }),
          fc.boolean(),
          async ({ field, n }, over) => {
            const size = over ? n + (4 << 20) : n;
            const big = new Uint8Array(size).fill(0x41);
            const req = IssueJoinTicketRequest.encode({
              diskUuid: field === 'uuid' ? Buffer.from(big).toString('latin1') : randomUUID(),
              certificateRequest: Buffer.from(field === 'csr' ? big : csrDer),
              isControlPlane: false,
              hostPublicKey: Buffer.from(field === 'host-key' ? big : new Uint8Array()),
              hostCertificatePrincipals: field === 'principals' ? [Buffer.from(big).toString('latin1')] : [],
            }).finish();
            checkOutcome(await join.call(req));
          },
        ),
        { numRuns: fuzzRuns(4, 'heavy'), seed: fuzzSeed(), timeout: 30_000, endOnFailure: true },
      );
      await validJoinWorks();
    },
    testTimeoutMs(fuzzRuns(4, 'heavy'), 2000),
  );
});
