/**
 * Caches AMD certificates (ASK/ASVK and ARK per product, VCEK per chip ID and TCB) in front of an
 * AmdCertFetcher. Concurrent requests for the same certificate share one fetch (single flight),
 * and fetches are spaced at least `minIntervalInMs` apart (AMD KDS allows about one request per
 * 10 s), so a join burst of many nodes costs one KDS request per distinct certificate. Failed
 * fetches are not cached.
 */
import type { AmdCertFetcher, AmdProductLine, AmdTcbSpl } from '../../../ports/amd-cert-fetcher.js';
import type { Clock } from '../../../ports/clock.js';
import { wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';

/** Options of {@link AmdCertCache}. */
export interface AmdCertCacheOptions {
  /** Minimum spacing between two fetches. Default 10 000 ms. */
  minIntervalInMs?: number;
  /** Most VCEKs kept (oldest evicted first). Default 1024. */
  maxVceks?: number;
}

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
