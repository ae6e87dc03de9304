/**
 * The gcp-sev-es variant through createValidator; the Compute lookup goes through the real
 * @google-cloud/compute against a local fake HTTP server, because GCE cannot exist here.
 */
import 'reflect-metadata';
import { createHash, randomBytes, webcrypto } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import * as x509 from '@peculiar/x509';
import { OAuth2Client } from 'google-auth-library';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseEventLog, replayEventLog } from '../../../../src/adapters/attestation/eventlog/tcg-log.js';
import { ComputeShieldedIdentity } from '../../../../src/adapters/cloud/gcp/shielded-identity.js';
import { createValidator } from '../../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../../src/domain/measurements.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../../../support/soft-tpm.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const vectors = resolve(import.meta.dirname, '../../../../../shared/testvectors');
const userData = createHash('sha256').update('spki').digest();
const nonce = randomBytes(32);
const policy = new MeasurementsPolicy(new Map([[15, { expected: Buffer.alloc(32), warnOnly: false }]]));
const tpm = SoftTpm.create();
const akPem = tpm.akPublicKeyPem();

const rejection = async (p: Promise<unknown>) => (await attestationRejection(p)).error;

function listen(handler: (req: IncomingMessage, body: string, res: ServerResponse) => void): Promise<Server> {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => handler(req, body, res));
  });
  return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}
const portOf = (s: Server) => (s.address() as AddressInfo).port;

describe('gcp-sev-es (fake Compute Engine through the real @google-cloud/compute)', () => {
  let server: Server;
  let requests = 0;
  const keys = new Map<string, string>();
  const log = readFileSync(resolve(vectors, 'go-tpm-tools/eventlogs/cos-85-amd-sev.bin'));
  const replayed = replayEventLog(parseEventLog(log)).get(SHA256) as Map<number, Uint8Array>;
  const gceTpm = SoftTpm.create();
  for (const [i, v] of replayed) gceTpm.setPcr(SHA256, i, v);
  const info = Buffer.from(
    JSON.stringify({ zone: 'us-central1-a', project_id: 'proj-1', instance_name: 'node-1' }),
  );
  beforeAll(async () => {
    keys.set(
      '/compute/v1/projects/proj-1/zones/us-central1-a/instances/node-1/getShieldedInstanceIdentity',
      gceTpm.akPublicKeyPem(),
    );
    keys.set(
      '/compute/v1/projects/proj-1/zones/us-central1-a/instances/other/getShieldedInstanceIdentity',
      akPem,
    );
    server = await listen((req, _body, res) => {
      requests++;
      const path = (req.url ?? '').split('?')[0] ?? '';
      res.setHeader('content-type', 'application/json');
      if (req.headers.authorization !== 'Bearer fake-token' || !keys.has(path)) {
        res.statusCode = req.headers.authorization === 'Bearer fake-token' ? 404 : 401;
        res.end(JSON.stringify({ error: { code: res.statusCode, message: 'not found', errors: [] } }));
        return;
      }
      res.end(
        JSON.stringify({ kind: 'compute#shieldedInstanceIdentity', signingKey: { ekPub: keys.get(path) } }),
      );
    });
  });
  afterAll(() => new Promise<void>((ok) => server.close(() => ok())));

  const validator = () => {
    const authClient = new OAuth2Client();
    authClient.setCredentials({ access_token: 'fake-token', expiry_date: Date.now() + 3600_000 });
    return createValidator('gcp-sev-es', {
      policy,
      gceShieldedIdentity: new ComputeShieldedIdentity({
        apiEndpoint: '127.0.0.1',
        port: portOf(server),
        protocol: 'http',
        authClient,
      }),
    });
  };

  it('accepts the instance whose shielded identity names the AK, on AMD SEV firmware', async () => {
    const doc = await new SoftVtpmIssuer(gceTpm, 'gcp-sev-es', { instanceInfo: info, eventLog: log }).issue(
      userData,
      nonce,
    );
    const res = await validator().validate(doc, nonce);
    expect(res.checks.find((c) => c.name === 'cvm')?.detail).toMatch(/AMD_SEV/);
  });
  it('untrusted attestation public key: refuses an AK that is not the instance signing key', async () => {
    const other = Buffer.from(
      JSON.stringify({ zone: 'us-central1-a', project_id: 'proj-1', instance_name: 'other' }),
    );
    const doc = await new SoftVtpmIssuer(gceTpm, 'gcp-sev-es', { instanceInfo: other, eventLog: log }).issue(
      userData,
      nonce,
    );
    const err = await rejection(validator().validate(doc, nonce));
    expect([err.check, err.message]).toEqual([
      'ak-trust',
      expect.stringMatching(/untrusted attestation public key/),
    ]);
  });
  it('a document whose quote does not verify for this session costs no Compute API request', async () => {
    const ghost = Buffer.from(
      JSON.stringify({ zone: 'us-central1-a', project_id: 'proj-1', instance_name: 'ghost-2' }),
    );
    const stale = await new SoftVtpmIssuer(gceTpm, 'gcp-sev-es', {
      instanceInfo: ghost,
      eventLog: log,
    }).issue(userData, Buffer.alloc(32, 0x77));
    const before = requests;
    const err = await rejection(validator().validate(stale, nonce));
    expect(err.check).not.toBe('ak-trust');
    expect(requests).toBe(before);
  });
  it('refuses an unknown instance', async () => {
    const none = Buffer.from(
      JSON.stringify({ zone: 'us-central1-a', project_id: 'proj-1', instance_name: 'ghost' }),
    );
    const doc = await new SoftVtpmIssuer(gceTpm, 'gcp-sev-es', { instanceInfo: none, eventLog: log }).issue(
      userData,
      nonce,
    );
    expect((await rejection(validator().validate(doc, nonce))).check).toBe('ak-trust');
  });
  it('not a CVM: refuses firmware that reports no confidential technology, and a missing event log', async () => {
    const plain = readFileSync(resolve(vectors, 'go-tpm-tools/eventlogs/rhel8-uefi.bin'));
    const t = SoftTpm.create({ privateKey: undefined });
    keys.set(
      '/compute/v1/projects/proj-1/zones/us-central1-a/instances/plain/getShieldedInstanceIdentity',
      t.akPublicKeyPem(),
    );
    for (const [i, v] of replayEventLog(parseEventLog(plain)).get(SHA256) ?? []) t.setPcr(SHA256, i, v);
    const pinfo = Buffer.from(
      JSON.stringify({ zone: 'us-central1-a', project_id: 'proj-1', instance_name: 'plain' }),
    );
    const err = await rejection(
      validator().validate(
        await new SoftVtpmIssuer(t, 'gcp-sev-es', { instanceInfo: pinfo, eventLog: plain }).issue(
          userData,
          nonce,
        ),
        nonce,
      ),
    );
    expect([err.check, err.message]).toEqual(['cvm', expect.stringMatching(/NONE \(expected: AMD_SEV\)/)]);
    const noLog = await new SoftVtpmIssuer(t, 'gcp-sev-es', { instanceInfo: pinfo }).issue(userData, nonce);
    expect((await rejection(validator().validate(noLog, nonce))).message).toMatch(/no event log/);
  });
});
