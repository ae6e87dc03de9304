/**
 * Caches AMD certificates (ASK/ASVK and ARK per product, VCEK per chip ID and TCB) in front of an
 * AmdCertFetcher. Concurrent requests for the same certificate share one fetch (single flight),
 * and fetches are spaced at least `minIntervalInMs` apart (AMD KDS allows about one request per
 * 10 s), so a join burst of many nodes costs one KDS request per distinct certificate. Failed
 * fetches are not cached. AMD's CRLs are cached per product and signer kind until their nextUpdate
 * (at most `maxCrlAgeInMs`); a CRL already past its nextUpdate is kept for a minute only, so
 * verification keeps failing on it without a request per attempt.
 */
import type { AmdCertFetcher, AmdProductLine, AmdTcbSpl } from '../../../ports/amd-cert-fetcher.js';
import type { Clock } from '../../../ports/clock.js';
import { wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { parseCrl } from '../shared/crl.js';

/** Options of {@link AmdCertCache}. */
export interface AmdCertCacheOptions {
  /** Minimum spacing between two fetches. Default 10 000 ms. */
  minIntervalInMs?: number;
  /** Most VCEKs kept (oldest evicted first). Default 1024. */
  maxVceks?: number;
  /** Longest a CRL is kept, even when its nextUpdate is later. Default 24 h. */
  maxCrlAgeInMs?: number;
}

/** A CRL as fetched (DER) with the time it stops being served from the cache. */
interface CachedCrl {
  der: Uint8Array;
  expiresAt: number;
}

const STALE_CRL_KEEP_MS = 60_000;

/** A cached chain above a signer (DER). */
export interface AmdChainDer {
  /** ASK for VCEKs, ASVK for VLEKs. */
  ask: Uint8Array;
  /** The ARK as served; callers compare it with their pinned ARK. */
  ark: Uint8Array | undefined;
}

/** Single-flight, rate-limited cache of AMD certificates. */
export class AmdCertCache {
  private readonly entries = new Map<string, Promise<unknown>>();
  private readonly minIntervalInMs: number;
  private readonly maxVceks: number;
  private readonly maxCrlAgeInMs: number;
  private readonly crls = new Map<string, Promise<CachedCrl>>();
  private vcekKeys: string[] = [];
  private gate: Promise<void> = Promise.resolve();
  private nextFetchAt = Number.NEGATIVE_INFINITY;
  /** Number of fetches made, for metrics and tests. */
  fetches = 0;

  constructor(
    private readonly fetcher: AmdCertFetcher,
    private readonly clock: Clock,
    options: AmdCertCacheOptions = {},
  ) {
    this.minIntervalInMs = options.minIntervalInMs ?? 10_000;
    this.maxVceks = options.maxVceks ?? 1024;
    this.maxCrlAgeInMs = options.maxCrlAgeInMs ?? 24 * 3600_000;
  }

  /**
   * Returns AMD's CRL (DER) for `product`'s `signer` hierarchy. Its signature is not checked here;
   * the caller verifies it against the pinned ARK.
   */
  async getCrl(product: AmdProductLine, signer: 'vcek' | 'vlek', options?: CallOptions): Promise<Uint8Array> {
    const key = `crl/${product}/${signer}`;
    const hit = this.crls.get(key);
    if (hit !== undefined) {
      // Waiters on a failing fetch share its error; an expired CRL is fetched again.
      const cached = await hit;
      if (cached.expiresAt > this.clock.now().getTime()) return cached.der;
      if (this.crls.get(key) === hit) this.crls.delete(key);
      return this.getCrl(product, signer, options);
    }
    const what = `fetching AMD's ${product} ${signer.toUpperCase()} CRL`;
    const p = this.throttled(async () => {
      const fetchCrl = this.fetcher.fetchCrl?.bind(this.fetcher);
      if (fetchCrl === undefined) throw new Error('this certificate source cannot fetch CRLs');
      const der = await fetchCrl(product, signer, options);
      const crl = await parseCrl(der);
      const now = this.clock.now().getTime();
      const next = crl.nextUpdate?.getTime() ?? Number.POSITIVE_INFINITY;
      const expiresAt = next <= now ? now + STALE_CRL_KEEP_MS : Math.min(next, now + this.maxCrlAgeInMs);
      return { der, expiresAt };
    }).catch((err: unknown) => {
      this.crls.delete(key);
      throw wrapError(what, err, 'unavailable');
    });
    this.crls.set(key, p);
    return (await p).der;
  }

  /** Returns the ASK/ASVK and ARK for `product`'s `signer` kind. */
  getChain(product: AmdProductLine, signer: 'vcek' | 'vlek', options?: CallOptions): Promise<AmdChainDer> {
    return this.once(
      `chain/${product}/${signer}`,
      async () => {
        const certs = await this.fetcher.fetchCertChain(product, signer, options);
        const ask = certs[0];
        if (ask === undefined) throw new Error('AMD returned an empty certificate chain');
        return { ask, ark: certs[1] };
      },
      `fetching the ${product} ${signer === 'vlek' ? 'ASVK' : 'ASK'} chain`,
    );
  }

  /** Returns the VCEK for `chipId` at `tcb`. */
  getVcek(
    product: AmdProductLine,
    chipId: Uint8Array,
    tcb: AmdTcbSpl,
    options?: CallOptions,
  ): Promise<Uint8Array> {
    const key = `vcek/${product}/${Buffer.from(chipId).toString('hex')}/${tcb.bl}.${tcb.tee}.${tcb.snp}.${tcb.ucode}.${tcb.fmc ?? ''}`;
    const isNew = !this.entries.has(key);
    const p = this.once(
      key,
      () => this.fetcher.fetchVcek(product, chipId, tcb, options),
      `fetching the ${product} VCEK`,
    );
    if (isNew) {
      this.vcekKeys.push(key);
      while (this.vcekKeys.length > this.maxVceks) {
        const old = this.vcekKeys.shift();
        if (old !== undefined) this.entries.delete(old);
      }
    }
    return p;
  }

  private once<T>(key: string, fetch: () => Promise<T>, what: string): Promise<T> {
    const hit = this.entries.get(key);
    if (hit !== undefined) return hit as Promise<T>;
    const p = this.throttled(fetch).catch((err: unknown) => {
      this.entries.delete(key);
      this.vcekKeys = this.vcekKeys.filter((k) => k !== key);
      throw wrapError(what, err, 'unavailable');
    });
    this.entries.set(key, p);
    return p;
  }

  /** Runs fetches one at a time, at least minIntervalInMs apart. */
  private throttled<T>(fetch: () => Promise<T>): Promise<T> {
    const run = this.gate.then(async () => {
      const wait = this.nextFetchAt - this.clock.now().getTime();
      if (wait > 0) await this.clock.sleep(wait);
      this.nextFetchAt = this.clock.now().getTime() + this.minIntervalInMs;
      this.fetches++;
      return fetch();
    });
    this.gate = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }
}
