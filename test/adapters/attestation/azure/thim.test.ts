/** Azure THIM (the VCEK service of IMDS) against a loopback fake (Azure cannot exist here), serving REAL AMD certificates. */
import { afterEach, expect, it } from 'vitest';
import { fetchAzureThimCertificates } from '../../../../src/adapters/attestation/azure/thim.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import {
  type FakeHttpServer,
  type FakeReply,
  startFakeHttpServer,
  UnexpectedRequest,
} from '../../cloud/shared/fake-http.js';
import { describeVectors, vec } from '../snp/vectors.js';

let fake: FakeHttpServer | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

async function thim(reply: () => FakeReply): Promise<string> {
  fake = await startFakeHttpServer((req) => {
    if (req.url !== '/metadata/THIM/amd/certification' || req.headers.metadata !== 'true')
      throw new UnexpectedRequest('not a THIM request');
    return reply();
  });
  return `${fake.url}/`;
}

describeVectors('fetchAzureThimCertificates', () => {
  const vcekPem = vec('constellation/snp/vcek.pem').toString();
  const chainPem = vec('constellation/snp/certchain.pem').toString();

  it('returns the VCEK as PEM and the chain as served', async () => {
    const base = await thim(() => ({ body: { vcekCert: vcekPem, certificateChain: chainPem, tcbm: 'x' } }));
    const got = await fetchAzureThimCertificates(base);
    expect(Buffer.from(got.reportSigner ?? []).toString()).toContain('-----BEGIN CERTIFICATE-----');
    expect(Buffer.from(got.certChain ?? []).toString()).toBe(chainPem);
    expect(fake?.unexpected).toEqual([]);
  });

  it.each([
    ['no certificate strings', { tcbm: 'x' }, /has no vcekCert\/certificateChain strings/],
    [
      'a VCEK that is not a certificate',
      { vcekCert: 'junk', certificateChain: 'x' },
      /THIM vcekCert is not a certificate/,
    ],
    [
      'a chain without PEM certificates',
      { vcekCert: 'VCEK', certificateChain: 'none' },
      /holds no PEM certificate/,
    ],
  ] as [string, Record<string, string>, RegExp][])(
    'refuses an answer with %s, naming the URL',
    async (_n, body, message) => {
      const base = await thim(() => ({
        body: { ...body, ...(body.vcekCert === 'VCEK' ? { vcekCert: vcekPem } : {}) },
      }));
      const err = await fetchAzureThimCertificates(base).catch((e: unknown) => e);
      expect((err as Error).message).toMatch(
        /^fetching the VCEK from http:\/\/127\.0\.0\.1:\d+\/metadata\/THIM\/amd\/certification: /,
      );
      expect((err as Error).message).toMatch(message);
    },
  );

  it('reports an HTTP failure as unavailable and a silent IMDS as deadline-exceeded', async () => {
    const base = await thim(() => ({ body: {} }));
    fake?.failNext();
    const busy = await fetchAzureThimCertificates(base).catch((e: unknown) => e);
    expect(isConfbootError(busy) && busy.code).toBe('unavailable');
    fake?.stallNext();
    const slow = await fetchAzureThimCertificates(base, { timeoutInMs: 100 }).catch((e: unknown) => e);
    expect(isConfbootError(slow) && slow.code).toBe('deadline-exceeded');
  });
});
