/**
 * AmdCertCache (single flight, ≥10 s between fetches, failures not cached) with a FAKE fetcher and
 * fake time, and KdsCertFetcher against a local HTTP server that serves the real KDS answers from
 * the test vectors on AMD's paths (no network).
 */
import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { AmdCertCache } from '../../../../src/adapters/attestation/snp/cert-cache.js';
import { KdsCertFetcher } from '../../../../src/adapters/attestation/snp/kds-fetcher.js';
import type { AmdCertFetcher, AmdProductLine, AmdTcbSpl } from '../../../../src/ports/amd-cert-fetcher.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { describeVectors, vec } from './vectors.js';

class FakeFetcher implements AmdCertFetcher {
  calls: string[] = [];
  failNext = 0;
  private gates: (() => void)[] = [];
  hold = false;

  async fetchVcek(product: AmdProductLine, chipId: Uint8Array, tcb: AmdTcbSpl): Promise<Uint8Array> {
    this.calls.push(`vcek ${product} ${chipId[0]} ${tcb.ucode}`);
    await this.maybeHold();
    if (this.failNext-- > 0) throw new Error('KDS said 429');
    return Uint8Array.of(1, chipId[0] as number, tcb.ucode);
  }

  async fetchCertChain(product: AmdProductLine, signer: 'vcek' | 'vlek'): Promise<Uint8Array[]> {
    this.calls.push(`chain ${product} ${signer}`);
    await this.maybeHold();
    return [Uint8Array.of(2), Uint8Array.of(3)];
  }

  release(): void {
    for (const g of this.gates.splice(0)) g();
  }

  private maybeHold(): Promise<void> {
    return this.hold ? new Promise((r) => this.gates.push(r)) : Promise.resolve();
  }
}

const TCB = { bl: 3, tee: 0, snp: 20, ucode: 200 };
const flush = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

describe('AmdCertCache (fake fetcher, fake clock)', () => {
  it('a burst of 20 requests for one VCEK makes one fetch', async () => {
    const f = new FakeFetcher();
    f.hold = true;
    const cache = new AmdCertCache(f, new FakeClock());
    const all = Promise.all(Array.from({ length: 20 }, () => cache.getVcek('milan', Uint8Array.of(9), TCB)));
    await flush();
    f.release();
    const got = await all;
    expect(f.calls).toEqual(['vcek milan 9 200']);
    expect(new Set(got).size).toBe(1);
    expect(await cache.getVcek('milan', Uint8Array.of(9), TCB)).toBe(got[0]);
    expect(cache.fetches).toBe(1);
  });

  it('spaces fetches of different certificates at least 10 s apart', async () => {
    const f = new FakeFetcher();
    const clock = new FakeClock();
    const cache = new AmdCertCache(f, clock);
    const chain = await cache.getChain('milan', 'vlek');
    expect(chain).toEqual({ ask: Uint8Array.of(2), ark: Uint8Array.of(3) });
    const vcek = cache.getVcek('milan', Uint8Array.of(1), TCB);
    await flush();
    expect(f.calls).toEqual(['chain milan vlek']);
    expect(clock.sleeps).toEqual([10_000]);
    await clock.advance(9_999);
    expect(f.calls).toHaveLength(1);
    await clock.advance(1);
    await vcek;
    expect(f.calls).toEqual(['chain milan vlek', 'vcek milan 1 200']);
  });

  it('does not cache failures, and names the operation', async () => {
    const f = new FakeFetcher();
    f.failNext = 1;
    const clock = new FakeClock();
    const cache = new AmdCertCache(f, clock, { minIntervalInMs: 0 });
    const err = await cache.getVcek('genoa', Uint8Array.of(5), TCB).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect(String((err as Error).message)).toBe('fetching the genoa VCEK: KDS said 429');
    expect(await cache.getVcek('genoa', Uint8Array.of(5), TCB)).toEqual(Uint8Array.of(1, 5, 200));
    expect(f.calls).toHaveLength(2);
  });

  it('evicts the oldest VCEK beyond maxVceks', async () => {
    const f = new FakeFetcher();
    const cache = new AmdCertCache(f, new FakeClock(), { minIntervalInMs: 0, maxVceks: 2 });
    for (const id of [1, 2, 3]) await cache.getVcek('milan', Uint8Array.of(id), TCB);
    await cache.getVcek('milan', Uint8Array.of(3), TCB);
    expect(f.calls).toHaveLength(3);
    await cache.getVcek('milan', Uint8Array.of(1), TCB);
    expect(f.calls).toHaveLength(4);
  });
});

describeVectors('KdsCertFetcher against a local KDS look-alike (real KDS answers from the vectors)', () => {
  let server: Server | undefined;
  afterEach(async () => {
    await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
    server = undefined;
  });
  const start = async (handler: (url: URL) => { status: number; body?: Uint8Array }) => {
    const seen: string[] = [];
    server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://x');
      seen.push(`${url.pathname}${url.search}`);
      const { status, body } = handler(url);
      res.writeHead(status);
      res.end(body);
    });
    await new Promise<void>((r) => server?.listen(0, '127.0.0.1', () => r()));
    const addr = server.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    return {
      fetcher: new KdsCertFetcher({ baseUrl: `http://127.0.0.1:${port}/`, timeoutInMs: 5_000 }),
      seen,
    };
  };

  it('fetches the VCEK by chip ID and TCB, and the chain as DER', async () => {
    const chipId = Buffer.from(
      '9e44aaef02cfca6fddbaca669c6cfd29e1ab8d97ebc939857128acbb13b8740df31436d34e86e5f8ae0cdfeb3a0e185db46decac176cc77d761c22a1b9dcf25b',
      'hex',
    );
    const { fetcher, seen } = await start((url) => {
      if (url.pathname === `/vcek/v1/Milan/${chipId.toString('hex')}`)
        return { status: 200, body: vec('constellation/snp/vcek.cert') };
      if (url.pathname === '/vcek/v1/Milan/cert_chain')
        return { status: 200, body: vec('go-sev-guest/trust/ask_ark_milan.pem') };
      return { status: 404 };
    });
    const der = await fetcher.fetchVcek('milan', chipId, { bl: 2, tee: 0, snp: 6, ucode: 93 });
    expect(Buffer.from(der).equals(vec('constellation/snp/vcek.cert'))).toBe(true);
    expect(seen[0]).toBe(`/vcek/v1/Milan/${chipId.toString('hex')}?blSPL=2&teeSPL=0&snpSPL=6&ucodeSPL=93`);
    const chain = await fetcher.fetchCertChain('milan', 'vcek');
    expect(chain).toHaveLength(2);
    expect((chain[0] as Uint8Array).length).toBeGreaterThan(1000);
  });

  it('maps HTTP errors to unavailable errors naming the URL', async () => {
    const { fetcher } = await start(() => ({ status: 429 }));
    const err = await fetcher.fetchCertChain('genoa', 'vlek').catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect(String((err as Error).message)).toMatch(
      /GET http:\/\/127\.0\.0\.1:\d+\/vlek\/v1\/Genoa\/cert_chain: HTTP 429/,
    );
  });
});
