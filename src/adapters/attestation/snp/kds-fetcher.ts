/**
 * AmdCertFetcher over HTTP against AMD's Key Distribution Service (https://kdsintf.amd.com) or a
 * mirror with the same paths: `/vcek/v1/{Product}/{hwid}?blSPL=…&teeSPL=…&snpSPL=…&ucodeSPL=…`
 * (DER), `/{vcek|vlek}/v1/{Product}/cert_chain` (PEM, ASK/ASVK then ARK) and
 * `/{vcek|vlek}/v1/{Product}/crl` (DER CRL signed by the ARK). Wrap it in an
 * AmdCertCache: KDS rate-limits clients.
 */
import type { AmdCertFetcher, AmdProductLine, AmdTcbSpl } from '../../../ports/amd-cert-fetcher.js';
import { ConfbootError, messageOf } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { AMD_PRODUCT_NAMES } from './report.js';

/** Options of {@link KdsCertFetcher}. */
export interface KdsCertFetcherOptions {
  /** Default `https://kdsintf.amd.com`. */
  baseUrl?: string;
  /** Per-request timeout. Default 10 000 ms. */
  timeoutInMs?: number;
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g;

/** Fetches VCEKs and chains from AMD KDS. */
export class KdsCertFetcher implements AmdCertFetcher {
  private readonly baseUrl: string;
  private readonly timeoutInMs: number;

  constructor(options: KdsCertFetcherOptions = {}) {
    this.baseUrl = (options.baseUrl ?? 'https://kdsintf.amd.com').replace(/\/+$/, '');
    this.timeoutInMs = options.timeoutInMs ?? 10_000;
  }

  async fetchVcek(
    product: AmdProductLine,
    chipId: Uint8Array,
    tcb: AmdTcbSpl,
    options?: CallOptions,
  ): Promise<Uint8Array> {
    // Turin VCEKs are keyed by the first 8 bytes of the chip ID and include the FMC SPL.
    const hwid = Buffer.from(product === 'turin' ? chipId.subarray(0, 8) : chipId).toString('hex');
    const q = new URLSearchParams();
    if (tcb.fmc !== undefined) q.set('fmcSPL', String(tcb.fmc));
    q.set('blSPL', String(tcb.bl));
    q.set('teeSPL', String(tcb.tee));
    q.set('snpSPL', String(tcb.snp));
    q.set('ucodeSPL', String(tcb.ucode));
    return this.get(`/vcek/v1/${AMD_PRODUCT_NAMES[product]}/${hwid}?${q.toString()}`, options);
  }

  async fetchCertChain(
    product: AmdProductLine,
    signer: 'vcek' | 'vlek',
    options?: CallOptions,
  ): Promise<Uint8Array[]> {
    const body = await this.get(`/${signer}/v1/${AMD_PRODUCT_NAMES[product]}/cert_chain`, options);
    const text = Buffer.from(body).toString('latin1');
    const certs = [...text.matchAll(PEM_CERT)].map((m) =>
      Uint8Array.from(Buffer.from((m[1] ?? '').replace(/\s+/g, ''), 'base64')),
    );
    if (certs.length === 0)
      throw new ConfbootError(
        'unavailable',
        `AMD KDS ${product} ${signer} cert_chain holds no PEM certificate`,
      );
    return certs;
  }

  async fetchCrl(
    product: AmdProductLine,
    signer: 'vcek' | 'vlek',
    options?: CallOptions,
  ): Promise<Uint8Array> {
    return this.get(`/${signer}/v1/${AMD_PRODUCT_NAMES[product]}/crl`, options);
  }

  private async get(path: string, options?: CallOptions): Promise<Uint8Array> {
    const url = `${this.baseUrl}${path}`;
    const signals = [AbortSignal.timeout(options?.timeoutInMs ?? this.timeoutInMs)];
    if (options?.signal) signals.push(options.signal);
    let res: Response;
    try {
      res = await fetch(url, { signal: AbortSignal.any(signals) });
    } catch (err) {
      throw new ConfbootError('unavailable', `GET ${url}: ${messageOf(err)}`, { cause: err });
    }
    if (!res.ok) throw new ConfbootError('unavailable', `GET ${url}: HTTP ${res.status}`);
    return new Uint8Array(await res.arrayBuffer());
  }
}
