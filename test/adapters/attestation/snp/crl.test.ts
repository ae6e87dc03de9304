/**
 * AMD's CRL: KdsCertFetcher.fetchCrl and AmdCertCache.getCrl against a FAKE KDS on loopback (AMD's
 * paths, CRLs of a FAKE AMD hierarchy signed with RSA-PSS like AMD's), and checkAmdCrl on the
 * FAKE hierarchy and on the REAL Azure VCEK chain. No real AMD CRL is in the vectors, so a real
 * chain can only be shown to refuse a CRL that AMD did not sign.
 */
import { X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCertificates } from '../../../../src/adapters/attestation/shared/certs.js';
import { AmdCertCache } from '../../../../src/adapters/attestation/snp/cert-cache.js';
import { checkAmdCrl } from '../../../../src/adapters/attestation/snp/crl.js';
import { KdsCertFetcher } from '../../../../src/adapters/attestation/snp/kds-fetcher.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { createFakeAmdCrl, createFakeAmdPki, FAKE_SERIALS, type FakeAmdPki } from './fake-amd-pki.js';
import { describeVectors, vec } from './vectors.js';

const AT = new Date('2026-01-01T00:00:00Z');

let pki: FakeAmdPki;
let other: FakeAmdPki;
beforeAll(async () => {
  [pki, other] = await Promise.all([createFakeAmdPki(), createFakeAmdPki()]);
}, 30_000);

const cert = (pem: string) => new X509Certificate(pem);
const vcekSubjects = () => ({ ark: cert(pki.arkPem), ask: cert(pki.askPem), signer: cert(pki.vcekPem) });
const vlekSubjects = () => ({ ark: cert(pki.arkPem), ask: cert(pki.asvkPem), signer: cert(pki.vlekPem) });

describe('checkAmdCrl (FAKE AMD hierarchy)', () => {
  it('accepts a CRL by the pinned ARK that lists neither the ASK nor the VCEK', async () => {
    const check = await checkAmdCrl(await createFakeAmdCrl(pki, { revoked: ['77'] }), vcekSubjects(), AT);
    expect(check).toEqual({
      name: 'amd-crl',
      ok: true,
      detail: 'ARK-Milan CRL of 2024-01-01T00:00:00.000Z lists neither SEV-Milan nor SEV-VCEK',
    });
  });

  it('refuses a revoked VCEK, VLEK, ASK or ASVK, naming it and its serial', async () => {
    const cases = [
      [vcekSubjects(), FAKE_SERIALS.vcek, 'SEV-VCEK serial 4'],
      [vcekSubjects(), FAKE_SERIALS.ask, 'SEV-Milan serial 2'],
      [vlekSubjects(), FAKE_SERIALS.vlek, 'SEV-VLEK serial 5'],
      [vlekSubjects(), FAKE_SERIALS.asvk, 'SEV-VLEK-Milan serial 3'],
    ] as const;
    for (const [subjects, serial, named] of cases) {
      const check = await checkAmdCrl(await createFakeAmdCrl(pki, { revoked: [serial] }), subjects, AT);
      expect(check.ok).toBe(false);
      expect(check.detail).toBe(`${named} is revoked by the ARK-Milan CRL`);
    }
  });

  it('accepts a CRL signed by the ASK of the chain', async () => {
    const check = await checkAmdCrl(await createFakeAmdCrl(pki, { issuer: 'ask' }), vcekSubjects(), AT);
    expect(check.ok).toBe(true);
    expect(check.detail).toMatch(/^SEV-Milan CRL of /);
  });

  it('refuses a CRL signed by another ARK of the same name', async () => {
    const check = await checkAmdCrl(await createFakeAmdCrl(other), vcekSubjects(), AT);
    expect(check).toEqual({
      name: 'amd-crl',
      ok: false,
      detail: 'AMD CRL signature does not verify with the pinned ARK-Milan',
    });
  });

  it('refuses a CRL outside its validity window and one that is not a CRL', async () => {
    const expired = await createFakeAmdCrl(pki, {
      thisUpdate: new Date('2025-01-01T00:00:00Z'),
      nextUpdate: new Date('2025-02-01T00:00:00Z'),
    });
    expect((await checkAmdCrl(expired, vcekSubjects(), AT)).detail).toBe(
      'AMD CRL expired at 2025-02-01T00:00:00.000Z (now 2026-01-01T00:00:00.000Z)',
    );
    const future = await createFakeAmdCrl(pki, { thisUpdate: new Date('2027-01-01T00:00:00Z') });
    expect((await checkAmdCrl(future, vcekSubjects(), AT)).detail).toMatch(/^AMD CRL is not valid yet/);
    const junk = await checkAmdCrl(Buffer.from('not a crl'), vcekSubjects(), AT);
    expect(junk.ok).toBe(false);
    expect(junk.detail).toMatch(/^AMD CRL cannot be parsed: /);
  });
});

describeVectors('checkAmdCrl on the REAL Azure VCEK chain', () => {
  it('refuses a CRL that claims to be ARK-Milan but is not signed by the real ARK', async () => {
    const [ask, ark] = loadCertificates(vec('constellation/snp/certchain.pem'));
    const pinned = new X509Certificate(vec('constellation/trust-anchors/amd-ark-milan.pem'));
    expect(ark?.fingerprint256).toBe(pinned.fingerprint256);
    const check = await checkAmdCrl(
      await createFakeAmdCrl(pki),
      { ark: pinned, ask, signer: new X509Certificate(vec('constellation/snp/vcek.pem')) },
      new Date('2026-11-21T00:00:00Z'),
    );
    expect(check).toEqual({
      name: 'amd-crl',
      ok: false,
      detail: 'AMD CRL signature does not verify with the pinned ARK-Milan',
    });
  });
});

describe('AMD CRL from a FAKE KDS on loopback (KdsCertFetcher + AmdCertCache)', () => {
  let server: Server;
  let base: string;
  const requests: string[] = [];
  let status = 200;
  let body: Uint8Array = new Uint8Array();
  let hold: Promise<void> | undefined;

  beforeAll(async () => {
    server = createServer((req, res) => {
      requests.push(req.url ?? '');
      const answer = () => {
        if (req.url !== '/vcek/v1/Milan/crl' && req.url !== '/vlek/v1/Milan/crl') {
          res.writeHead(404).end();
          return;
        }
        res.writeHead(status, { 'content-type': 'application/pkix-crl' }).end(Buffer.from(body));
      };
      if (hold) void hold.then(answer);
      else answer();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    base = `http://127.0.0.1:${address.port}`;
  });
  afterAll(async () => {
    await new Promise((r) => server.close(r));
  });

  const fresh = (clock = new FakeClock(AT)) => ({
    clock,
    cache: new AmdCertCache(new KdsCertFetcher({ baseUrl: base, timeoutInMs: 5_000 }), clock, {
      minIntervalInMs: 0,
    }),
  });

  it('fetches /{vcek|vlek}/v1/Milan/crl once for a burst of 10 (single flight) and serves the cache after', async () => {
    requests.length = 0;
    status = 200;
    body = await createFakeAmdCrl(pki);
    let release: () => void = () => {};
    hold = new Promise((r) => {
      release = r;
    });
    const { cache } = fresh();
    const burst = Promise.all(Array.from({ length: 10 }, () => cache.getCrl('milan', 'vcek')));
    while (requests.length === 0) await new Promise((r) => setTimeout(r, 5));
    release();
    hold = undefined;
    const got = await burst;
    expect(requests).toEqual(['/vcek/v1/Milan/crl']);
    for (const der of got) expect(Buffer.from(der).equals(Buffer.from(body))).toBe(true);
    await cache.getCrl('milan', 'vcek');
    expect(requests).toEqual(['/vcek/v1/Milan/crl']);
    await cache.getCrl('milan', 'vlek');
    expect(requests).toEqual(['/vcek/v1/Milan/crl', '/vlek/v1/Milan/crl']);
    expect((await checkAmdCrl(got[0] as Uint8Array, vcekSubjects(), AT)).ok).toBe(true);
  });

  it('keeps a CRL until its nextUpdate (at most 24 h), then fetches it again', async () => {
    requests.length = 0;
    status = 200;
    body = await createFakeAmdCrl(pki, { thisUpdate: AT, nextUpdate: new Date(AT.getTime() + 3600_000) });
    const { cache, clock } = fresh();
    await cache.getCrl('milan', 'vcek');
    await clock.advance(3599_000);
    await cache.getCrl('milan', 'vcek');
    expect(requests).toHaveLength(1);
    await clock.advance(2_000);
    await cache.getCrl('milan', 'vcek');
    expect(requests).toHaveLength(2);
  });

  it('does not cache a failure: KDS HTTP 500 is an unavailable error naming the URL, the next call fetches again', async () => {
    requests.length = 0;
    status = 500;
    const { cache } = fresh();
    const err = await cache.getCrl('milan', 'vcek').catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect((err as Error).message).toBe(
      `fetching AMD's milan VCEK CRL: GET ${base}/vcek/v1/Milan/crl: HTTP 500`,
    );
    status = 200;
    body = await createFakeAmdCrl(pki);
    await cache.getCrl('milan', 'vcek');
    expect(requests).toHaveLength(2);
  });

  it('refuses to cache something that is not a CRL', async () => {
    status = 200;
    body = Buffer.from('<html>maintenance</html>');
    const { cache } = fresh();
    await expect(cache.getCrl('milan', 'vcek')).rejects.toThrow(/^fetching AMD's milan VCEK CRL: /);
  });
});
