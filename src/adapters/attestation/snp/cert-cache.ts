/**
 * Caches AMD certificates (ASK/ASVK and ARK per product, VCEK per chip ID and TCB, CRLs) in front of
 * an AmdCertFetcher. Every fetch is shared by all callers that want the same certificate (single
 * flight) and runs on its own deadline, independent of any caller: a caller whose signal aborts only
 * stops waiting.
 *
 * Two kinds of fetches, because their keys come from different places:
 *  - chains and CRLs: a handful of keys (product × signer kind) fixed by the policy; fetched one at
 *    a time, at least `minIntervalInMs` apart (AMD KDS allows about one request per 10 s). A failure
 *    is not cached; the next caller asks again, behind the same spacing. At most `maxChainWaiters`
 *    callers wait for a chain not fetched yet (each holds a verification slot); one more is refused
 *    at once (recoverable). CRLs are asked for only for reports that passed their own checks.
 *  - VCEKs of reports that do not carry their signing certificate: the chip ID and TCB are chosen by
 *    whoever sent the report, before its signature can be checked. These lookups have their own
 *    small budget (BoundedLookups: `vcekBurst` at once, one more every `minIntervalInMs`); a miss
 *    beyond it is refused at once with a recoverable `resource-exhausted` error, never queued. A
 *    chip ID and TCB whose fetch failed is refused without a request for `vcekNegativeTtlInMs`.
 * AMD's CRLs are cached per product and signer kind until their nextUpdate (at most `maxCrlAgeInMs`);
 * a CRL already past its nextUpdate is kept for a minute only, so verification keeps failing on it
 * without a request per attempt.
 */
import type { AmdCertFetcher, AmdProductLine, AmdTcbSpl } from '../../../ports/amd-cert-fetcher.js';
import type { Clock } from '../../../ports/clock.js';
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { BoundedLookups, LOOKUP_BUDGET_EXHAUSTED, untilAborted } from '../../http/bounded-lookups.js';
import { parseCrl } from '../shared/crl.js';

/** Options of {@link AmdCertCache}. */
export interface AmdCertCacheOptions {
  /**
   * Minimum spacing between two chain or CRL fetches, and the refill interval of the VCEK budget.
   * Default 10 000 ms.
   */
  minIntervalInMs?: number;
  /** Most VCEKs kept (oldest evicted first). Default 1024. */
  maxVceks?: number;
  /** VCEK fetches that may start back to back (and run at once). Default 2. */
  vcekBurst?: number;
  /**
   * Callers that may wait at once for a chain that is not cached yet; one more is refused at once
   * (recoverable). Each waiter is a verification holding a slot, so this stays small. Default 2.
   */
  maxChainWaiters?: number;
  /** How long a chip ID and TCB whose VCEK fetch failed is refused without a request. Default 60 s. */
  vcekNegativeTtlInMs?: number;
  /** Deadline of one fetch, whoever waits for it. Default 10 000 ms. */
  fetchTimeoutInMs?: number;
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
  private readonly maxCrlAgeInMs: number;
  private readonly fetchTimeoutInMs: number;
  private readonly crls = new Map<string, Promise<CachedCrl>>();
  private readonly vceks: BoundedLookups<Uint8Array>;
  private gate: Promise<void> = Promise.resolve();
  private nextFetchAt = Number.NEGATIVE_INFINITY;
  private chainFetches = 0;
  private readonly maxChainWaiters: number;
  /** Callers waiting per chain whose fetch has not succeeded yet. */
  private readonly chainWaiters = new Map<string, number>();
  /** Chains fetched (served without waiting). */
  private readonly chainsDone = new Set<string>();

  constructor(
    private readonly fetcher: AmdCertFetcher,
    private readonly clock: Clock,
    options: AmdCertCacheOptions = {},
  ) {
    this.minIntervalInMs = options.minIntervalInMs ?? 10_000;
    this.maxCrlAgeInMs = options.maxCrlAgeInMs ?? 24 * 3600_000;
    this.fetchTimeoutInMs = options.fetchTimeoutInMs ?? 10_000;
    this.maxChainWaiters = options.maxChainWaiters ?? 2;
    this.vceks = new BoundedLookups({
      clock,
      what: 'AMD KDS fetches of VCEKs the reports did not carry',
      burst: options.vcekBurst ?? 2,
      refillEveryInMs: Math.max(1, this.minIntervalInMs),
      maxEntries: options.maxVceks ?? 1024,
      negativeTtlInMs: options.vcekNegativeTtlInMs ?? 60_000,
    });
  }

  /** Number of fetches made (chains, CRLs and VCEKs), for metrics and tests. */
  get fetches(): number {
    return this.chainFetches + this.vceks.started;
  }

  /** VCEK fetches refused because their budget was used up. */
  get vcekRefusals(): number {
    return this.vceks.refused;
  }

  /** Options for one shared fetch: its own deadline, no caller's signal. */
  private fetchOptions(): CallOptions {
    return { timeoutInMs: this.fetchTimeoutInMs };
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
      const cached = await detach(hit, options);
      if (cached.expiresAt > this.clock.now().getTime()) return cached.der;
      if (this.crls.get(key) === hit) this.crls.delete(key);
      return this.getCrl(product, signer, options);
    }
    const what = `fetching AMD's ${product} ${signer.toUpperCase()} CRL`;
    const p = this.throttled(async () => {
      const fetchCrl = this.fetcher.fetchCrl?.bind(this.fetcher);
      if (fetchCrl === undefined) throw new Error('this certificate source cannot fetch CRLs');
      const der = await fetchCrl(product, signer, this.fetchOptions());
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
    p.catch(() => {});
    return (await detach(p, options)).der;
  }

  /** Returns the ASK/ASVK and ARK for `product`'s `signer` kind. */
  getChain(product: AmdProductLine, signer: 'vcek' | 'vlek', options?: CallOptions): Promise<AmdChainDer> {
    return this.once(
      `chain/${product}/${signer}`,
      async () => {
        const certs = await this.fetcher.fetchCertChain(product, signer, this.fetchOptions());
        const ask = certs[0];
        if (ask === undefined) throw new Error('AMD returned an empty certificate chain');
        return { ask, ark: certs[1] };
      },
      `fetching the ${product} ${signer === 'vlek' ? 'ASVK' : 'ASK'} chain`,
      options,
    );
  }

  /**
   * Returns the VCEK for `chipId` at `tcb`: cached, shared with a running fetch, or fetched within
   * the VCEK budget. Refused at once (recoverable) when the budget is used up or this chip ID and TCB
   * failed recently.
   */
  getVcek(
    product: AmdProductLine,
    chipId: Uint8Array,
    tcb: AmdTcbSpl,
    options?: CallOptions,
  ): Promise<Uint8Array> {
    const hwid = Buffer.from(chipId).toString('hex');
    const key = `${product}/${hwid}/${tcb.bl}.${tcb.tee}.${tcb.snp}.${tcb.ucode}.${tcb.fmc ?? ''}`;
    const what = `fetching the ${product} VCEK`;
    return this.vceks.get(
      key,
      `${what} of chip ${hwid.slice(0, 16)}…`,
      () =>
        this.fetcher.fetchVcek(product, chipId, tcb, this.fetchOptions()).catch((err: unknown) => {
          throw wrapError(what, err, 'unavailable');
        }),
      options?.signal,
    );
  }

  private once<T>(key: string, fetch: () => Promise<T>, what: string, options?: CallOptions): Promise<T> {
    const hit = this.entries.get(key);
    if (hit !== undefined && this.chainsDone.has(key)) return hit as Promise<T>;
    // Not fetched yet: every waiter is a verification holding its slot, so only a few may wait.
    const waiting = this.chainWaiters.get(key) ?? 0;
    if (waiting >= this.maxChainWaiters)
      return Promise.reject(
        new ConfbootError(
          'resource-exhausted',
          `${what}: ${waiting} verifications already wait for it from AMD KDS; retry later`,
          { recoverable: true, reason: LOOKUP_BUDGET_EXHAUSTED },
        ),
      );
    let p = hit as Promise<T> | undefined;
    if (p === undefined) {
      const started = this.throttled(fetch).then(
        (value) => {
          this.chainsDone.add(key);
          return value;
        },
        (err: unknown) => {
          this.entries.delete(key);
          throw wrapError(what, err, 'unavailable');
        },
      );
      started.catch(() => {});
      this.entries.set(key, started);
      p = started;
    }
    this.chainWaiters.set(key, waiting + 1);
    const leave = () => {
      const n = (this.chainWaiters.get(key) ?? 1) - 1;
      if (n > 0) this.chainWaiters.set(key, n);
      else this.chainWaiters.delete(key);
    };
    const mine = detach(p, options);
    mine.then(leave, leave);
    return mine;
  }

  /** Runs chain and CRL fetches one at a time, at least minIntervalInMs apart. */
  private throttled<T>(fetch: () => Promise<T>): Promise<T> {
    const run = this.gate.then(async () => {
      const wait = this.nextFetchAt - this.clock.now().getTime();
      if (wait > 0) await this.clock.sleep(wait);
      this.nextFetchAt = this.clock.now().getTime() + this.minIntervalInMs;
      this.chainFetches++;
      return fetch();
    });
    this.gate = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }
}

/** A shared fetch as seen by one caller: its signal stops only its own wait. */
function detach<T>(p: Promise<T>, options: CallOptions | undefined): Promise<T> {
  return untilAborted(
    p,
    options?.signal,
    () =>
      new ConfbootError('unavailable', 'waiting for an AMD certificate: the caller stopped waiting', {
        cause: options?.signal?.reason,
      }),
  );
}
