/**
 * An AMD certificate cache that serves one configured signing key (the ASK of a VCEK chain or the
 * ASVK of a VLEK chain, from the attestation config's `amdSigningKey`) for its signer kind and
 * product line, and sends everything else to a shared cache. The order a validator looks in is the
 * issuer's own chain, then the configured key, then AMD KDS through the shared cache.
 */
import type { X509Certificate } from 'node:crypto';
import type { AmdCertFetcher, AmdProductLine, AmdTcbSpl } from '../../../ports/amd-cert-fetcher.js';
import type { Clock } from '../../../ports/clock.js';
import type { CallOptions } from '../../../ports/types.js';
import { AmdCertCache, type AmdChainDer } from './cert-cache.js';

/** Never called: {@link ConfiguredSigningKeyCache} delegates every fetch to its inner cache. */
const NO_FETCHER: AmdCertFetcher = {
  fetchVcek: () => Promise.reject(new Error('unreachable: fetches go to the shared cache')),
  fetchCertChain: () => Promise.reject(new Error('unreachable: fetches go to the shared cache')),
};

/** The configured signing key: its certificate, the chain it heads and the product line. */
export interface ConfiguredSigningKey {
  cert: X509Certificate;
  signer: 'vcek' | 'vlek';
  product: AmdProductLine;
}

/** Serves {@link ConfiguredSigningKey} first and delegates the rest to `inner`. */
export class ConfiguredSigningKeyCache extends AmdCertCache {
  constructor(
    private readonly inner: AmdCertCache,
    private readonly configured: ConfiguredSigningKey,
    clock: Clock,
  ) {
    super(NO_FETCHER, clock);
  }

  override getChain(
    product: AmdProductLine,
    signer: 'vcek' | 'vlek',
    options?: CallOptions,
  ): Promise<AmdChainDer> {
    if (product === this.configured.product && signer === this.configured.signer)
      return Promise.resolve({ ask: new Uint8Array(this.configured.cert.raw), ark: undefined });
    return this.inner.getChain(product, signer, options);
  }

  override getVcek(
    product: AmdProductLine,
    chipId: Uint8Array,
    tcb: AmdTcbSpl,
    options?: CallOptions,
  ): Promise<Uint8Array> {
    return this.inner.getVcek(product, chipId, tcb, options);
  }

  override getCrl(
    product: AmdProductLine,
    signer: 'vcek' | 'vlek',
    options?: CallOptions,
  ): Promise<Uint8Array> {
    return this.inner.getCrl(product, signer, options);
  }
}
