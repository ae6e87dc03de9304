import type { CallOptions } from './types.js';

/** AMD EPYC product line, as in AMD KDS URLs (lower case here). */
export type AmdProductLine = 'milan' | 'genoa' | 'turin';

/** TCB components a VCEK is derived for (KDS query parameters blSPL, teeSPL, snpSPL, ucodeSPL, fmcSPL). */
export interface AmdTcbSpl {
  bl: number;
  tee: number;
  snp: number;
  ucode: number;
  /** Turin only. */
  fmc?: number;
}

/**
 * Fetches AMD SEV-SNP certificates from AMD's Key Distribution Service (or a mirror). Callers cache
 * the answers: KDS allows roughly one request per 10 s per client.
 */
export interface AmdCertFetcher {
  /** Returns the DER VCEK for `chipId` (64 bytes, the report's chip_id) at `tcb`. */
  fetchVcek(
    product: AmdProductLine,
    chipId: Uint8Array,
    tcb: AmdTcbSpl,
    options?: CallOptions,
  ): Promise<Uint8Array>;
  /**
   * Returns the DER certificates of the chain above `signer`, intermediate first: [ASK, ARK] for
   * `vcek`, [ASVK, ARK] for `vlek`. The ARK returned is never trusted by itself; callers pin it.
   */
  fetchCertChain(
    product: AmdProductLine,
    signer: 'vcek' | 'vlek',
    options?: CallOptions,
  ): Promise<Uint8Array[]>;
  /**
   * Returns AMD's certificate revocation list (DER) for `product`'s `signer` hierarchy, signed by
   * the product's ARK. Optional: a fetcher without it cannot serve revocation checks.
   */
  fetchCrl?(product: AmdProductLine, signer: 'vcek' | 'vlek', options?: CallOptions): Promise<Uint8Array>;
}

/** DI token for {@link AmdCertFetcher}. */
export const AmdCertFetcher = Symbol.for('confboot.AmdCertFetcher');
