/**
 * The join service's memory bounds: derived from the budget (default 256 MiB), the gRPC receive
 * limit from the per-field request limits, the byte budget of requests held, and the refusal of a
 * budget the service cannot live in. The attack test (test/attack/memory.test.ts) measures RSS.
 */
import { describe, expect, it } from 'vitest';
import {
  JOIN_SERVICE_MEMORY_BUDGET_MIB,
  JOIN_SERVICE_MEMORY_HEADROOM_MIB,
} from '../../../src/app/defaults.js';
import { ByteBudget, deriveMemoryBounds } from '../../../src/app/join-service/memory.js';
import {
  checkRequestSizes,
  maxTicketRequestBytes,
  REQUEST_FIELD_LIMITS,
} from '../../../src/domain/ticket-request.js';

describe('memory bounds', () => {
  it('derives the default bounds from the default budget', () => {
    expect([JOIN_SERVICE_MEMORY_BUDGET_MIB, JOIN_SERVICE_MEMORY_HEADROOM_MIB]).toEqual([256, 64]);
    expect(deriveMemoryBounds()).toEqual({
      budgetMib: 256,
      maxMessageBytes: 34 * 1024,
      requestBytesInFlight: 83 * 34 * 1024,
      maxConcurrent: 41,
      maxConnections: 99,
      maxHandshakes: 341,
      maxStreamsPerConnection: 4,
      maxSessionMemoryMib: 1,
    });
    // A configured cap below what the budget allows is kept; a larger budget allows more.
    expect(deriveMemoryBounds(256, 16).maxConcurrent).toBe(16);
    expect(deriveMemoryBounds(1024).maxConcurrent).toBeGreaterThan(300);
    expect(deriveMemoryBounds(1024).maxHandshakes).toBeGreaterThan(3000);
  });

  it('refuses a budget at or below the baseline', () => {
    expect(() => deriveMemoryBounds(128)).toThrow(/memory budget must be a whole number of MiB above 168/);
    expect(() => deriveMemoryBounds(200.5)).toThrow(/whole number/);
  });

  it('the gRPC receive limit holds the largest request the field limits allow', () => {
    const l = REQUEST_FIELD_LIMITS;
    expect(maxTicketRequestBytes()).toBeGreaterThanOrEqual(
      l.certificateRequestBytes +
        l.diskUuidChars +
        l.hostPublicKeyBytes +
        l.hostCertificatePrincipals * l.hostCertificatePrincipalChars,
    );
    expect(maxTicketRequestBytes() % 1024).toBe(0);
  });

  it('checks every field size before parsing, naming the field', () => {
    const ok = { diskUuid: 'x'.repeat(64), certificateRequest: new Uint8Array(16 * 1024) };
    expect(() => checkRequestSizes(ok)).not.toThrow();
    expect(() => checkRequestSizes({ ...ok, diskUuid: 'x'.repeat(65) })).toThrow(
      'disk UUID has 65 characters, more than the limit of 64',
    );
    expect(() => checkRequestSizes({ ...ok, hostPublicKey: new Uint8Array(1025) })).toThrow(
      /host public key/,
    );
    expect(() => checkRequestSizes({ ...ok, hostCertificatePrincipals: Array(17).fill('a') })).toThrow(
      /17 entries/,
    );
    expect(() => checkRequestSizes({ ...ok, hostCertificatePrincipals: ['a'.repeat(254)] })).toThrow(
      /principal has 254 characters/,
    );
  });

  it('ByteBudget refuses what does not fit and releases once', () => {
    const b = new ByteBudget(100);
    const r1 = b.tryAcquire(60);
    expect(r1).toBeDefined();
    expect(b.tryAcquire(41)).toBeUndefined();
    const r2 = b.tryAcquire(40);
    expect(b.inUse).toBe(100);
    r1?.();
    r1?.();
    expect(b.inUse).toBe(40);
    r2?.();
    expect(b.inUse).toBe(0);
  });
});
