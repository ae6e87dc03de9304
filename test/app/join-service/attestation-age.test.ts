/**
 * An attested join connection carries its attestation only so long: the real join service
 * (startJoinService through the harness: real attested TLS with the test-only dummy attestation, the
 * real key service, SIMULATED Kubernetes) under a fake clock gets two rejoin calls over ONE
 * attested connection, the second after the clock moved on. A call after the measurement set the
 * caller matched has expired, or more than a minute after the connection was attested, is refused
 * without a ticket; before, the handshake's verdict held for every later call.
 */
import { randomUUID } from 'node:crypto';
import { status } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { AttestedChannelCredentials } from '../../../src/adapters/grpc/atls/credentials.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { IssueRejoinTicketRequest, IssueRejoinTicketResponse } from '../../../src/gen/join.js';
import { MAX_ATTESTATION_AGE_MS } from '../../../src/ports/join-call.js';
import type { MeasurementSetValidity } from '../../../src/ports/measurement-policy.js';
import type { ValidationResult, Validator } from '../../../src/ports/validator.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { RawGrpcClient } from '../../fuzz/harness/grpc.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';
import { useTmpDirs } from '../../support/tmp.js';
import { startHarness } from './harness.js';

const tmp = useTmpDirs('confboot-attestation-age-');
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The dummy validator, reporting a match with measurement set `current` valid in `validity`. */
function validatorMatching(
  validity: MeasurementSetValidity | undefined,
): Validator & { handshakes(): number } {
  const inner = new DummyValidator();
  return {
    handshakes: () => inner.calls.length,
    variant: inner.variant,
    oid: inner.oid,
    async validate(document, nonce): Promise<ValidationResult> {
      const result = await inner.validate(document, nonce);
      return {
        ...result,
        measurementSet: 'current',
        ...(validity === undefined ? {} : { measurementSetValidity: validity }),
      };
    },
  };
}

async function rejoinTwice(
  validity: (clock: FakeClock) => MeasurementSetValidity | undefined,
  advanceMs: number,
) {
  const clock = new FakeClock(Date.now());
  const validator = validatorMatching(validity(clock));
  const h = await startHarness(tmp(), { clock, validators: [validator] });
  cleanups.push(() => h.stop());
  const client = new RawGrpcClient(
    h.endpoint,
    new AttestedChannelCredentials({ issuer: new DummyIssuer(), clock: new SystemClock() }),
    '/join.API/IssueRejoinTicket',
  );
  cleanups.push(() => client.close());
  const request = IssueRejoinTicketRequest.encode({ diskUuid: randomUUID() }).finish();
  const first = await client.call(request);
  expect(first.code, first.details).toBe(status.OK);
  expect(IssueRejoinTicketResponse.decode(first.responses[0] ?? new Uint8Array()).stateDiskKey).toHaveLength(
    32,
  );
  await clock.advance(advanceMs);
  const second = await client.call(request);
  // One connection carried both calls: it was attested once.
  expect(validator.handshakes()).toBe(1);
  return { second, audits: h.logs.audits(), h };
}

describe('attestation re-checked at every join call (real join service, fake clock)', () => {
  it('a call after the matched measurement set expired is refused (measurement-set-expired), on the same connection', async () => {
    const { second, audits } = await rejoinTwice(
      (clock) => ({ expires: new Date(clock.now().getTime() + 10_000) }),
      11_000,
    );
    expect(second.code).toBe(status.PERMISSION_DENIED);
    expect(second.details).toMatch(/measurement set current the caller attested with is not valid now/);
    expect(audits.map((e) => [e.outcome, e.reason])).toEqual([
      ['issued', 'ok'],
      ['refused', 'measurement-set-expired'],
    ]);
  });

  it('a call more than a minute after the connection was attested is refused (unavailable: reconnect), on the same connection', async () => {
    const { second, audits } = await rejoinTwice(() => undefined, MAX_ATTESTATION_AGE_MS + 1_000);
    expect(second.code).toBe(status.UNAVAILABLE);
    expect(second.details).toMatch(/attested 61 s ago, more than 60 s: reconnect and attest again/);
    expect(audits.map((e) => [e.outcome, e.reason])).toEqual([
      ['issued', 'ok'],
      ['refused', 'attestation-age'],
    ]);
  });

  it('within the set’s window and the minute, the same connection keeps getting tickets', async () => {
    const { second } = await rejoinTwice(
      (clock) => ({ expires: new Date(clock.now().getTime() + 10_000) }),
      9_000,
    );
    expect(second.code, second.details).toBe(status.OK);
  });
});
