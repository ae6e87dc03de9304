/**
 * The production vTPM variants through createValidator, and the aws-nitro-tpm EC2 AMI check through
 * the real @aws-sdk/client-ec2 against a local fake HTTP server, because EC2 cannot exist here.
 * gcp-sev-es and azure-trustedlaunch are tested beside their modules.
 */
import 'reflect-metadata';
import { createHash, randomBytes, webcrypto } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Ec2AmiTpmSupport } from '../../../../src/adapters/cloud/aws/ami-tpm-support.js';
import { createValidator } from '../../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../../src/domain/measurements.js';
import { AttestationError, isConfbootError } from '../../../../src/ports/errors.js';
import type { Variant } from '../../../../src/ports/variant.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import { SoftTpm, SoftVtpmIssuer } from '../../../support/soft-tpm.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const userData = createHash('sha256').update('spki').digest();
const nonce = randomBytes(32);
const policy = new MeasurementsPolicy(new Map([[15, { expected: Buffer.alloc(32), warnOnly: false }]]));
const tpm = SoftTpm.create();

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
