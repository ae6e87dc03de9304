/**
 * The production vTPM variants through createValidator. Cloud lookups go through the real SDKs
 * (@aws-sdk/client-ec2, @google-cloud/compute) against local fake HTTP servers, because EC2 and GCE
 * cannot exist here; Azure's AK certificate chain is synthetic (generated with @peculiar/x509), and
 * upstream's embedded Microsoft root is used only to show that it has expired.
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
import {
  parseCertificates,
  verifyCertificateChain,
} from '../../../../src/adapters/attestation/shared/x509-chain.js';
import { Ec2AmiTpmSupport } from '../../../../src/adapters/cloud/aws/ami-tpm-support.js';
import { ComputeShieldedIdentity } from '../../../../src/adapters/cloud/gcp/shielded-identity.js';
import { createValidator } from '../../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../../src/domain/measurements.js';
import { AttestationError, isConfbootError } from '../../../../src/ports/errors.js';
import type { Variant } from '../../../../src/ports/variant.js';
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

describe('createValidator', () => {
  it.each(['dummy', 'aws-sev-snp', 'qemu-tdx'] as Variant[])('refuses %s', (v) => {
    expect(() => createValidator(v, { policy })).toThrow(v === 'dummy' ? /tests only/ : /not a vTPM variant/);
  });
  it('refuses variants whose port or roots are missing', () => {
    expect(() => createValidator('aws-nitro-tpm', { policy })).toThrow(/EC2/);
    expect(() => createValidator('gcp-sev-es', { policy })).toThrow(/GCE/);
    expect(() => createValidator('azure-trustedlaunch', { policy })).toThrow(/root/);
  });
  it('sets variant and OID', () => {
    const v = createValidator('qemu-vtpm', { policy });
    expect([v.variant, v.oid]).toEqual(['qemu-vtpm', '1.3.9900.5.1']);
  });
});

describe('aws-nitro-tpm EC2 AMI check (fake EC2 through the real @aws-sdk/client-ec2; the AK is trusted as carried by the trustCarriedAk opt-in, AWS documents are tested in aws-nitro-tpm.test.ts)', () => {
  let server: Server;
  const images: Record<string, string | null> = {
    'ami-0123456789abcdef0': 'v2.0',
    'ami-0000000000000000f': null,
  };
  const requests: string[] = [];
  beforeAll(async () => {
    server = await listen((_req, body, res) => {
      const q = new URLSearchParams(body);
      requests.push(`${q.get('Action')} ${q.get('ImageId.1')}`);
      const id = q.get('ImageId.1') ?? '';
      res.setHeader('content-type', 'text/xml');
      if (!(id in images)) {
        res.statusCode = 400;
        res.end(
          `<?xml version="1.0" encoding="UTF-8"?><Response><Errors><Error><Code>InvalidAMIID.NotFound</Code><Message>The image id '[${id}]' does not exist</Message></Error></Errors><RequestID>r1</RequestID></Response>`,
        );
        return;
      }
      const tpmSupport = images[id] ? `<tpmSupport>${images[id]}</tpmSupport>` : '';
      res.end(
        `<?xml version="1.0" encoding="UTF-8"?><DescribeImagesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>r1</requestId><imagesSet><item><imageId>${id}</imageId><imageState>available</imageState>${tpmSupport}</item></imagesSet></DescribeImagesResponse>`,
      );
    });
  });
  afterAll(() => new Promise<void>((ok) => server.close(() => ok())));

  const validator = () =>
    createValidator('aws-nitro-tpm', {
      policy,
      nitroTpmTrust: { trustCarriedAk: true },
      amiTpmSupport: new Ec2AmiTpmSupport({
        endpoint: `http://127.0.0.1:${portOf(server)}`,
        credentials: { accessKeyId: 'AKIDFAKE', secretAccessKey: 'fake' },
        maxAttempts: 1,
      }),
    });
  const issue = (imageId: string) =>
    new SoftVtpmIssuer(tpm, 'aws-nitro-tpm', {
      instanceInfo: Buffer.from(
        JSON.stringify({ region: 'eu-central-1', imageId, instanceId: 'i-1', accountId: '1' }),
      ),
    }).issue(userData, nonce);

  it('accepts an instance whose AMI has TpmSupport v2.0', async () => {
    const res = await validator().validate(await issue('ami-0123456789abcdef0'), nonce);
    expect(res.checks.find((c) => c.name === 'cvm')?.detail).toMatch(/TpmSupport v2.0/);
    expect(requests).toContain('DescribeImages ami-0123456789abcdef0');
  });
  it('not a CVM: refuses an AMI without TpmSupport', async () => {
    const err = await rejection(validator().validate(await issue('ami-0000000000000000f'), nonce));
    expect([err.check, err.message]).toEqual(['cvm', expect.stringMatching(/TpmSupport null/)]);
  });
  it('refuses an unknown AMI', async () => {
    expect((await rejection(validator().validate(await issue('ami-0aaaaaaaaaaaaaaa1'), nonce))).check).toBe(
      'cvm',
    );
  });
  it('refuses missing instance info', async () => {
    const doc = await new SoftVtpmIssuer(tpm, 'aws-nitro-tpm').issue(userData, nonce);
    expect((await rejection(validator().validate(doc, nonce))).message).toMatch(/InstanceInfo is missing/);
  });
  it('reports an unreachable EC2 as unavailable, not as a verdict', async () => {
    const v = createValidator('aws-nitro-tpm', {
      policy,
      nitroTpmTrust: { trustCarriedAk: true },
      amiTpmSupport: new Ec2AmiTpmSupport({
        endpoint: 'http://127.0.0.1:1',
        credentials: { accessKeyId: 'AKIDFAKE', secretAccessKey: 'fake' },
        maxAttempts: 1,
      }),
    });
    const err = await v.validate(await issue('ami-0123456789abcdef0'), nonce).catch((e: unknown) => e);
    expect(err).not.toBeInstanceOf(AttestationError);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
  });
});

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

describe('azure-trustedlaunch (synthetic AK certificate chain)', () => {
  const alg = {
    name: 'RSASSA-PKCS1-v1_5',
    hash: 'SHA-256',
    publicExponent: new Uint8Array([1, 0, 1]),
    modulusLength: 2048,
  };
  let root: x509.X509Certificate;
  let otherRoot: x509.X509Certificate;
  let ca: x509.X509Certificate;
  let akCert: x509.X509Certificate;
  let wrongKeyCert: x509.X509Certificate;
  const now = new Date('2026-11-21T00:00:00Z');
  beforeAll(async () => {
    const rootKeys = await webcrypto.subtle.generateKey(alg, false, ['sign', 'verify']);
    const caKeys = await webcrypto.subtle.generateKey(alg, false, ['sign', 'verify']);
    const otherKeys = await webcrypto.subtle.generateKey(alg, false, ['sign', 'verify']);
    const validity = {
      notBefore: new Date('2025-01-01T00:00:00Z'),
      notAfter: new Date('2030-01-01T00:00:00Z'),
    };
    const caExt = [new x509.BasicConstraintsExtension(true, undefined, true)];
    root = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: '01',
      name: 'CN=Test AME Root',
      keys: rootKeys,
      signingAlgorithm: alg,
      extensions: caExt,
      ...validity,
    });
    otherRoot = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: '02',
      name: 'CN=Other Root',
      keys: otherKeys,
      signingAlgorithm: alg,
      extensions: caExt,
      ...validity,
    });
    ca = await x509.X509CertificateGenerator.create({
      serialNumber: '03',
      subject: 'CN=Test Azure VM CA',
      issuer: root.subject,
      publicKey: caKeys.publicKey,
      signingKey: rootKeys.privateKey,
      signingAlgorithm: alg,
      extensions: caExt,
      ...validity,
    });
    const akKey = await webcrypto.subtle.importKey('spki', tpm.akPublicKeySpki(), alg, true, ['verify']);
    akCert = await x509.X509CertificateGenerator.create({
      serialNumber: '04',
      subject: 'CN=vm-ak',
      issuer: ca.subject,
      publicKey: akKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: alg,
      ...validity,
    });
    wrongKeyCert = await x509.X509CertificateGenerator.create({
      serialNumber: '05',
      subject: 'CN=vm-ak',
      issuer: ca.subject,
      publicKey: otherKeys.publicKey,
      signingKey: caKeys.privateKey,
      signingAlgorithm: alg,
      ...validity,
    });
  });

  const info = (leaf: x509.X509Certificate) =>
    Buffer.from(
      JSON.stringify({
        AkCert: Buffer.from(leaf.rawData).toString('base64'),
        CA: Buffer.from(ca.rawData).toString('base64'),
      }),
    );
  const validator = (roots: x509.X509Certificate[], at = now) =>
    createValidator('azure-trustedlaunch', {
      policy,
      azureAkRoots: roots.map((r) => r.toString('pem')),
      clock: { now: () => at },
    });

  it('accepts an AK certificate chaining via CA to the configured root', async () => {
    const doc = await new SoftVtpmIssuer(tpm, 'azure-trustedlaunch', { instanceInfo: info(akCert) }).issue(
      userData,
      nonce,
    );
    const res = await validator([root]).validate(doc, nonce);
    expect(res.checks.filter((c) => c.name.startsWith('ak-')).every((c) => c.ok)).toBe(true);
  });
  it('refuses a chain to a root that is not configured', async () => {
    const doc = await new SoftVtpmIssuer(tpm, 'azure-trustedlaunch', { instanceInfo: info(akCert) }).issue(
      userData,
      nonce,
    );
    expect((await rejection(validator([otherRoot]).validate(doc, nonce))).check).toBe('ak-certificate');
  });
  it('refuses once the configured root has expired', async () => {
    const doc = await new SoftVtpmIssuer(tpm, 'azure-trustedlaunch', { instanceInfo: info(akCert) }).issue(
      userData,
      nonce,
    );
    const err = await rejection(validator([root], new Date('2030-06-01T00:00:00Z')).validate(doc, nonce));
    expect([err.check, err.message]).toEqual(['ak-certificate', expect.stringMatching(/not valid at 2030/)]);
  });
  it('untrusted attestation public key: refuses an AK that differs from the certificate key', async () => {
    const doc = await new SoftVtpmIssuer(tpm, 'azure-trustedlaunch', {
      instanceInfo: info(wrongKeyCert),
    }).issue(userData, nonce);
    const err = await rejection(validator([root]).validate(doc, nonce));
    expect([err.check, err.message]).toEqual([
      'ak-trust',
      expect.stringMatching(/untrusted attestation public key/),
    ]);
  });
  it("upstream's embedded Microsoft root has expired (2026-05-24): valid before, refused now", async () => {
    const [ame] = await parseCertificates(
      readFileSync(resolve(vectors, 'constellation/trust-anchors/azure-ameroot.pem')),
      'ameroot',
    );
    if (!ame) throw new Error('no ameroot');
    await expect(
      verifyCertificateChain(ame, [], [ame], new Date('2026-01-01T00:00:00Z')),
    ).resolves.toHaveLength(2);
    await expect(verifyCertificateChain(ame, [], [ame], now)).rejects.toThrow(/not valid at 2026-11-21/);
  });
});
