/**
 * Test helpers for the gRPC edge: attacker issuers/validators built on the test-only dummy
 * attestation, a one-connection attested TLS pair on 127.0.0.1, and raw TLS clients that speak the
 * frame protocol by hand. Test code only.
 */
import { createServer, connect as netConnect, type Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { attestSocket } from '../../../src/adapters/grpc/atls/connection.js';
import type { AtlsOptions } from '../../../src/adapters/grpc/atls/exchange.js';
import type { AttestedPeer } from '../../../src/adapters/grpc/atls/peer-attestation.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { AttestationError } from '../../../src/ports/errors.js';
import type { Issuer } from '../../../src/ports/issuer.js';
import type { JoinTicket } from '../../../src/ports/types.js';
import type { ValidationResult } from '../../../src/ports/validator.js';
import type { Variant } from '../../../src/ports/variant.js';
import { DummyIssuer, DummyValidator } from '../../support/dummy-attestation.js';

export const clock = new SystemClock();

/** Records every document it issues (to replay later). */
export class RecordingIssuer extends DummyIssuer {
  readonly issued: Uint8Array[] = [];
  override async issue(userData: Uint8Array, nonce: Uint8Array): Promise<Uint8Array> {
    const doc = await super.issue(userData, nonce);
    this.issued.push(doc);
    return doc;
  }
}

/** An attacker that replays a recorded document instead of attesting this connection. */
export class ReplayingIssuer implements Issuer {
  readonly oid: string;
  constructor(
    private readonly document: () => Uint8Array,
    readonly variant: Variant = 'dummy',
  ) {
    this.oid = variantOid(variant);
  }
  async issue(): Promise<Uint8Array> {
    return this.document();
  }
}

/** Attests the right nonce but someone else's key (user data of a random SPKI). */
export class WrongUserDataIssuer extends DummyIssuer {
  override async issue(_userData: Uint8Array, nonce: Uint8Array): Promise<Uint8Array> {
    return super.issue(new Uint8Array(32).fill(7), nonce);
  }
}

/** An issuer whose TPM is broken. */
export class FailingIssuer extends DummyIssuer {
  override async issue(): Promise<Uint8Array> {
    throw new Error('TPM quote failed');
  }
}

/** A validator that refuses every document with a named check. */
export class RefusingValidator extends DummyValidator {
  override async validate(): Promise<ValidationResult> {
    throw new AttestationError('pcr-values', 'untrusted measurement value 00 at index 4');
  }
}

/** A careless validator that ignores the nonce (to show the user-data binding still holds). */
export class NonceIgnoringValidator extends DummyValidator {
  override async validate(document: Uint8Array): Promise<ValidationResult> {
    const doc = JSON.parse(new TextDecoder().decode(document)) as { UserData: string };
    return { userData: new Uint8Array(Buffer.from(doc.UserData, 'base64')), checks: [], warnings: [] };
  }
}

/** Both ends' outcome of one attested TLS connection. */
export interface PairOutcome {
  server: PromiseSettledResult<{ socket: TLSSocket; peer: AttestedPeer }>;
  client: PromiseSettledResult<{ socket: TLSSocket; peer: AttestedPeer }>;
}

/** Runs attested TLS once between a server and a client on 127.0.0.1; closes everything after. */
export async function attestPair(server: AtlsOptions, client: AtlsOptions): Promise<PairOutcome> {
  const srv = createServer();
  const serverSide = new Promise<{ socket: TLSSocket; peer: AttestedPeer }>((resolve, reject) => {
    srv.once('connection', (raw: Socket) => attestSocket(raw, 'server', server).then(resolve, reject));
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', () => r()));
  const port = (srv.address() as { port: number }).port;
  const raw = netConnect(port, '127.0.0.1');
  raw.on('error', () => {});
  await new Promise<void>((r) => raw.once('connect', () => r()));
  const [s, c] = await Promise.allSettled([serverSide, attestSocket(raw, 'client', client)]);
  for (const r of [s, c]) if (r.status === 'fulfilled') r.value.socket.destroy();
  raw.destroy();
  await new Promise<void>((r) => srv.close(() => r()));
  return { server: s, client: c };
}

/** The AttestationError check of a rejected outcome (or the error's message if it is not one). */
export function checkOf(r: PromiseSettledResult<unknown>): string | undefined {
  if (r.status === 'fulfilled') return undefined;
  const e = r.reason as { check?: string; message?: string };
  return e.check ?? `not an AttestationError: ${e.message}`;
}

/** Raw aTLS client helpers, shared with the attack suite (test/support/raw-atls-client.ts). */
export { rawTlsClient, readVerdict } from '../../support/raw-atls-client.js';

/** A join ticket with recognisable bytes. */
export function sampleTicket(): JoinTicket {
  return {
    stateDiskKey: new Uint8Array(32).fill(0x11),
    measurementSalt: new Uint8Array(32).fill(0x22),
    measurementSecret: new Uint8Array(32).fill(0x33),
    kubeletCert: new TextEncoder().encode('-----BEGIN CERTIFICATE-----\n'),
    apiServerEndpoint: '10.0.0.1:6443',
    token: 'abcdef.0123456789abcdef',
    discoveryTokenCaCertHash: `sha256:${'ab'.repeat(32)}`,
    controlPlaneFiles: [{ name: 'etcd/ca.key', data: new Uint8Array([1, 2, 3]) }],
    kubernetesVersion: '',
    kubernetesComponents: [
      { url: 'https://x/y.tgz', hash: 'sha256:00', installPath: '/opt/y', extract: true },
    ],
    authorizedCaPublicKey: new TextEncoder().encode('ssh-ed25519 AAAA\n'),
    hostCertificate: new Uint8Array(0),
  };
}
