/**
 * The AMD KDS client against a FAKE KDS on loopback HTTP (AMD's service cannot be reached here),
 * serving REAL AMD certificate chains from ../shared/testvectors: upstream's KDS paths and query
 * order for VCEKs (Turin keyed by 8 chip-ID bytes, with its FMC SPL), the ASK/ARK chain split into
 * DER certificates, the CRL path, and failures (HTTP errors, no PEM, no server) as unavailable.
 */
import { X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KdsCertFetcher } from '../../../../src/adapters/attestation/snp/kds-fetcher.js';
import { vec } from './vectors.js';

const requests: string[] = [];
let server: Server;
let kds: KdsCertFetcher;
let baseUrl = '';

beforeAll(async () => {
  server = createServer((req, res) => {
    const url = req.url ?? '';
    requests.push(url);
    if (url === '/vcek/v1/Milan/cert_chain') res.end(vec('go-sev-guest/trust/ask_ark_milan.pem'));
    else if (url === '/vlek/v1/Genoa/cert_chain') res.end('no certificates here');
    else if (url === '/vcek/v1/Milan/crl') res.end(Buffer.from([1, 2, 3]));
    else if (url.startsWith('/vcek/v1/') && !url.includes('cert_chain')) res.end(Buffer.from([0x30, 0x82]));
    else res.writeHead(404).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  kds = new KdsCertFetcher({ baseUrl: `${baseUrl}/` });
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

describe('KdsCertFetcher', () => {
  it('asks for a Milan VCEK by the hex chip ID with the four SPLs', async () => {
    requests.length = 0;
    const chipId = Uint8Array.from({ length: 64 }, (_, i) => i);
    expect([...(await kds.fetchVcek('milan', chipId, { bl: 3, tee: 0, snp: 8, ucode: 115 }))]).toEqual([
      0x30, 0x82,
    ]);
    expect(requests).toEqual([
      `/vcek/v1/Milan/${Buffer.from(chipId).toString('hex')}?blSPL=3&teeSPL=0&snpSPL=8&ucodeSPL=115`,
    ]);
  });

  it('asks for a Turin VCEK by the first 8 chip-ID bytes, FMC SPL first', async () => {
    requests.length = 0;
    const chipId = new Uint8Array(64).fill(0xab);
    await kds.fetchVcek('turin', chipId, { fmc: 1, bl: 2, tee: 3, snp: 4, ucode: 5 });
    expect(requests).toEqual([
      '/vcek/v1/Turin/abababababababab?fmcSPL=1&blSPL=2&teeSPL=3&snpSPL=4&ucodeSPL=5',
    ]);
  });

  it("splits the REAL Milan cert_chain into AMD's ASK and ARK, DER", async () => {
    const chain = await kds.fetchCertChain('milan', 'vcek');
    expect(chain.map((der) => new X509Certificate(der).subject.match(/CN=([^\n]+)/)?.[1])).toEqual([
      'SEV-Milan',
      'ARK-Milan',
    ]);
  });

  it('fetches the CRL from its path', async () => {
    expect([...(await kds.fetchCrl('milan', 'vcek'))]).toEqual([1, 2, 3]);
  });

  it.each([
    [
      'a cert_chain without PEM',
      () => kds.fetchCertChain('genoa', 'vlek'),
      'AMD KDS genoa vlek cert_chain holds no PEM certificate',
    ],
    ['an HTTP error', () => kds.fetchCrl('turin', 'vlek'), '/vlek/v1/Turin/crl: HTTP 404'],
    [
      'no server',
      () => new KdsCertFetcher({ baseUrl: 'http://127.0.0.1:9' }).fetchCrl('milan', 'vcek'),
      'GET http://127.0.0.1:9/vcek/v1/Milan/crl: ',
    ],
  ])('refuses %s as unavailable', async (_n, call, message) => {
    await expect(call()).rejects.toThrow(
      expect.objectContaining({ code: 'unavailable', message: expect.stringContaining(message) }),
    );
  });
});
