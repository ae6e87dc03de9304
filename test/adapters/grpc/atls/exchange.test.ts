/**
 * Nonce uniqueness of attested TLS (the Keylime CVE-2026-6420 class: a verifier nonce that repeats
 * lets an old quote be replayed). Each side's nonce is a TLS exporter value of its own connection
 * (label EXPORTER_LABEL, context = the attester's role), so it must differ on every connection and
 * for each direction, and both ends must derive the same value. 1,000 real TLS 1.3 connections on
 * 127.0.0.1 through the production attestSocket, mutually attested with the test-only dummy
 * issuer/validator, which record the nonce each end used.
 */
import { describe, expect, it } from 'vitest';
import { NONCE_BYTES } from '../../../../src/adapters/grpc/atls/protocol.js';
import type { ValidationResult } from '../../../../src/ports/validator.js';
import { DummyIssuer, DummyValidator } from '../../../support/dummy-attestation.js';
import { attestPair, clock } from '../helpers.js';

const CONNECTIONS = 1_000;
const PARALLEL = 10;

/** Remembers the nonce it was asked to bind. */
class NonceIssuer extends DummyIssuer {
  nonce: Uint8Array | undefined;
  override async issue(userData: Uint8Array, nonce: Uint8Array): Promise<Uint8Array> {
    this.nonce = nonce.slice();
    return super.issue(userData, nonce);
  }
}

/** Remembers the nonce it expected. */
class NonceValidator extends DummyValidator {
  nonce: Uint8Array | undefined;
  override async validate(document: Uint8Array, nonce: Uint8Array): Promise<ValidationResult> {
    this.nonce = nonce.slice();
    return super.validate(document, nonce);
  }
}

interface Observed {
  /** The nonce the client bound (its issuer) and the one the server expected of it. */
  clientIssued: string;
  serverExpected: string;
  /** The nonce the server bound and the one the client expected of it. */
  serverIssued: string;
  clientExpected: string;
}

const hex = (b: Uint8Array | undefined): string => {
  if (b === undefined) throw new Error('no nonce recorded');
  expect(b.length).toBe(NONCE_BYTES);
  return Buffer.from(b).toString('hex');
};

async function oneConnection(): Promise<Observed> {
  const [clientIssuer, serverIssuer] = [new NonceIssuer(), new NonceIssuer()];
  const [clientValidator, serverValidator] = [new NonceValidator(), new NonceValidator()];
  const out = await attestPair(
    { issuer: serverIssuer, validators: [serverValidator], clock },
    { issuer: clientIssuer, validators: [clientValidator], clock },
  );
  expect(out.server.status).toBe('fulfilled');
  expect(out.client.status).toBe('fulfilled');
  return {
    clientIssued: hex(clientIssuer.nonce),
    serverExpected: hex(serverValidator.nonce),
    serverIssued: hex(serverIssuer.nonce),
    clientExpected: hex(clientValidator.nonce),
  };
}

describe('attested TLS exporter nonces (real TLS on loopback)', () => {
  it(`never repeat across ${CONNECTIONS} connections, differ per direction, and agree on both ends`, async () => {
    const observed: Observed[] = [];
    for (let done = 0; done < CONNECTIONS; done += PARALLEL) {
      observed.push(...(await Promise.all(Array.from({ length: PARALLEL }, () => oneConnection()))));
    }
    expect(observed).toHaveLength(CONNECTIONS);
    for (const o of observed) {
      // Both ends derive the same exporter value for each direction.
      expect(o.serverExpected).toBe(o.clientIssued);
      expect(o.clientExpected).toBe(o.serverIssued);
    }
    const all = observed.flatMap((o) => [o.clientIssued, o.serverIssued]);
    // 2 per connection (client-role and server-role), all distinct: none repeats across
    // connections and the two directions of one connection never share a nonce.
    expect(new Set(all).size).toBe(2 * CONNECTIONS);
    expect(all).not.toContain('00'.repeat(NONCE_BYTES));
  }, 180_000);
});
