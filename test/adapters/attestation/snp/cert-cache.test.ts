/**
 * AmdCertCache (single flight independent of any caller, chains and CRLs ≥10 s apart, a small budget
 * and a negative cache for VCEK fetches) with a FAKE fetcher and fake time, and KdsCertFetcher against a local HTTP server that serves the real KDS answers from
 * the test vectors on AMD's paths (no network).
 */
import { createServer, type Server } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { AmdCertCache } from '../../../../src/adapters/attestation/snp/cert-cache.js';
import { KdsCertFetcher } from '../../../../src/adapters/attestation/snp/kds-fetcher.js';
import type { AmdCertFetcher, AmdProductLine, AmdTcbSpl } from '../../../../src/ports/amd-cert-fetcher.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import type { CallOptions } from '../../../../src/ports/types.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { describeVectors, vec } from './vectors.js';

class FakeFetcher implements AmdCertFetcher {
  calls: string[] = [];
  /** The options each fetch got. */
  options: (CallOptions | undefined)[] = [];
  failNext = 0;
  private gates: (() => void)[] = [];
  hold = false;

  async fetchVcek(
    product: AmdProductLine,
    chipId: Uint8Array,
    tcb: AmdTcbSpl,
    options?: CallOptions,
  ): Promise<Uint8Array> {
    this.calls.push(`vcek ${product} ${chipId[0]} ${tcb.ucode}`);
    this.options.push(options);
    await this.maybeHold();
    if (this.failNext-- > 0) throw new Error('KDS said 429');
    return Uint8Array.of(1, chipId[0] as number, tcb.ucode);
  }

  async fetchCertChain(
    product: AmdProductLine,
    signer: 'vcek' | 'vlek',
    options?: CallOptions,
  ): Promise<Uint8Array[]> {
    this.calls.push(`chain ${product} ${signer}`);
    this.options.push(options);
    await this.maybeHold();
    if (this.failNext-- > 0) throw new Error('KDS said 503');
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

  it('spaces chain fetches at least 10 s apart', async () => {
    const f = new FakeFetcher();
    const clock = new FakeClock();
    const cache = new AmdCertCache(f, clock);
    const chain = await cache.getChain('milan', 'vlek');
    expect(chain).toEqual({ ask: Uint8Array.of(2), ark: Uint8Array.of(3) });
    const second = cache.getChain('milan', 'vcek');
    await flush();
    expect(f.calls).toEqual(['chain milan vlek']);
    expect(clock.sleeps).toEqual([10_000]);
    await clock.advance(9_999);
    expect(f.calls).toHaveLength(1);
    await clock.advance(1);
    await second;
    expect(f.calls).toEqual(['chain milan vlek', 'chain milan vcek']);
  });

  it('does not cache a failed chain fetch, and names the operation', async () => {
    const f = new FakeFetcher();
    f.failNext = 1;
    const cache = new AmdCertCache(f, new FakeClock(), { minIntervalInMs: 0 });
    const err = await cache.getChain('genoa', 'vcek').catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect(String((err as Error).message)).toBe('fetching the genoa ASK chain: KDS said 503');
    expect((await cache.getChain('genoa', 'vcek')).ask).toEqual(Uint8Array.of(2));
    expect(f.calls).toHaveLength(2);
  });

  it('refuses a chip ID and TCB whose VCEK fetch failed, without a request, until the negative entry expires', async () => {
    const f = new FakeFetcher();
    f.failNext = 1;
    const clock = new FakeClock();
    const cache = new AmdCertCache(f, clock, { vcekBurst: 5, vcekNegativeTtlInMs: 60_000 });
    const err = await cache.getVcek('genoa', Uint8Array.of(5), TCB).catch((e: unknown) => e);
    expect(String((err as Error).message)).toContain('fetching the genoa VCEK: KDS said 429');
    await clock.advance(59_999);
    const again = await cache.getVcek('genoa', Uint8Array.of(5), TCB).catch((e: unknown) => e);
    expect(isConfbootError(again) && again.recoverable).toBe(true);
    expect(String((again as Error).message)).toMatch(
      /KDS said 429 \(failed 60 s ago; not asked again for 1 s\)/,
    );
    expect(f.calls).toHaveLength(1);
    // Another TCB of the same chip is another key.
    await cache.getVcek('genoa', Uint8Array.of(5), { ...TCB, ucode: 201 });
    expect(f.calls).toHaveLength(2);
    await clock.advance(1);
    expect(await cache.getVcek('genoa', Uint8Array.of(5), TCB)).toEqual(Uint8Array.of(1, 5, 200));
    expect(f.calls).toHaveLength(3);
  });

  it('refuses VCEK misses beyond its budget at once (recoverable), never queued; the budget refills with time', async () => {
    const f = new FakeFetcher();
    f.hold = true;
    const clock = new FakeClock();
    const cache = new AmdCertCache(f, clock, { vcekBurst: 2 });
    const first = cache.getVcek('milan', Uint8Array.of(1), TCB);
    const second = cache.getVcek('milan', Uint8Array.of(2), TCB);
    const third = await cache.getVcek('milan', Uint8Array.of(3), TCB).catch((e: unknown) => e);
    expect(isConfbootError(third) && [third.code, third.recoverable]).toEqual(['resource-exhausted', true]);
    expect(String((third as Error).message)).toMatch(/are running, the most allowed at once; retry later/);
    // A cached or running key still answers: only misses spend the budget.
    const sharing = cache.getVcek('milan', Uint8Array.of(1), TCB);
    await flush();
    expect(f.calls).toEqual(['vcek milan 1 200', 'vcek milan 2 200']);
    f.release();
    await Promise.all([first, second, sharing]);
    // Both tokens are spent: the next miss is refused until a token comes back (one per 10 s).
    const fourth = await cache.getVcek('milan', Uint8Array.of(4), TCB).catch((e: unknown) => e);
    expect(String((fourth as Error).message)).toMatch(/budget of 2 .* per 20 s is used up/);
    expect(clock.pending).toBe(0);
    await clock.advance(10_000);
    f.hold = false;
    expect(await cache.getVcek('milan', Uint8Array.of(4), TCB)).toEqual(Uint8Array.of(1, 4, 200));
    expect(cache.vcekRefusals).toBe(2);
    expect(f.calls).toHaveLength(3);
  });

  it('shares one VCEK fetch that no caller can abort: an aborting caller only stops its own wait', async () => {
    const f = new FakeFetcher();
    f.hold = true;
    const cache = new AmdCertCache(f, new FakeClock());
    const quitter = new AbortController();
    const abandoned = cache.getVcek('milan', Uint8Array.of(7), TCB, { signal: quitter.signal });
    const honest = cache.getVcek('milan', Uint8Array.of(7), TCB, { signal: new AbortController().signal });
    await flush();
    expect(f.options).toEqual([{ timeoutInMs: 10_000 }]);
    quitter.abort(new Error('peer closed'));
    const quit = await abandoned.catch((e: unknown) => e);
    expect(String((quit as Error).message)).toMatch(/the caller stopped waiting/);
    let honestDone = false;
    void honest.then(() => {
      honestDone = true;
    });
    await flush();
    expect(honestDone).toBe(false);
    f.release();
    expect(await honest).toEqual(Uint8Array.of(1, 7, 200));
    expect(f.calls).toEqual(['vcek milan 7 200']);
  });

  it('a caller waiting behind the chain gate stops waiting when its signal aborts; the fetch still serves the others', async () => {
    const f = new FakeFetcher();
    const clock = new FakeClock();
    const cache = new AmdCertCache(f, clock);
    await cache.getChain('milan', 'vlek');
    const quitter = new AbortController();
    const waiting = cache.getChain('milan', 'vcek', { signal: quitter.signal });
    const other = cache.getChain('milan', 'vcek');
    await flush();
    quitter.abort(new Error('peer closed'));
    expect(String(((await waiting.catch((e: unknown) => e)) as Error).message)).toMatch(/stopped waiting/);
    expect(f.calls).toEqual(['chain milan vlek']);
    await clock.advance(10_000);
    expect((await other).ask).toEqual(Uint8Array.of(2));
    expect(f.calls).toEqual(['chain milan vlek', 'chain milan vcek']);
  });

  it('lets only a few callers wait for a chain not fetched yet; once fetched, everyone is served', async () => {
    const f = new FakeFetcher();
    f.hold = true;
    const cache = new AmdCertCache(f, new FakeClock(), { maxChainWaiters: 2 });
    const waiting = [cache.getChain('milan', 'vcek'), cache.getChain('milan', 'vcek')];
    const third = await cache.getChain('milan', 'vcek').catch((e: unknown) => e);
    expect(isConfbootError(third) && [third.code, third.recoverable]).toEqual(['resource-exhausted', true]);
    expect(String((third as Error).message)).toMatch(
      /2 verifications already wait for it from AMD KDS; retry later/,
    );
    await flush();
    f.release();
    await Promise.all(waiting);
    const many = await Promise.all(Array.from({ length: 5 }, () => cache.getChain('milan', 'vcek')));
    expect(many.every((c) => c.ask[0] === 2)).toBe(true);
    expect(f.calls).toEqual(['chain milan vcek']);
  });

  it('evicts the oldest VCEK beyond maxVceks', async () => {
    const f = new FakeFetcher();
    const cache = new AmdCertCache(f, new FakeClock(), { maxVceks: 2, vcekBurst: 10 });
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
