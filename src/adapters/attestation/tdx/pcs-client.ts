/**
 * TDX collateral from Intel PCS (adapter, attestation/tdx): the source behind
 * TdxValidatorConfig.getCollateral when the join service verifies TDX quotes against Intel's
 * Provisioning Certification Service (API v4) or a mirror with the same paths, instead of a
 * collateral directory. Four documents make one TdxCollateral, exactly as loadTdxCollateralDir
 * returns it:
 *  - `GET {base}/tdx/certification/v4/tcb?fmspc={hex}`: TCB info JSON, issuer chain in the
 *    `TCB-Info-Issuer-Chain` header (URL-encoded PEM);
 *  - `GET {base}/tdx/certification/v4/qe/identity`: TD_QE identity JSON, chain in
 *    `SGX-Enclave-Identity-Issuer-Chain`;
 *  - `GET {base}/sgx/certification/v4/pckcrl?ca={platform|processor}&encoding=der`: PCK CRL (DER),
 *    chain in `SGX-PCK-CRL-Issuer-Chain`;
 *  - the Intel SGX Root CA CRL (DER) from its own URL.
 * Responses are only parsed here (so garbage is refused and never cached); their signatures,
 * chains and validity are verifyTdxQuote's job. Each document is cached until its own nextUpdate
 * (capped by a maximum age, as Intel's PCCS refreshes daily); the QE identity and CRLs are shared
 * by every FMSPC. Concurrent requests for one document share one fetch, and failures are never
 * cached. Time for the cache comes from the Clock port; request deadlines are real time.
 */
import type { X509Certificate } from 'node:crypto';
import type { Clock } from '../../../ports/clock.js';
import { ConfbootError, isConfbootError, messageOf } from '../../../ports/errors.js';
import type { CallOptions } from '../../../ports/types.js';
import { untilAborted } from '../../http/bounded-lookups.js';
import { expectOk, type HttpResponse, httpRequest } from '../../http/request.js';
import { loadCertificates } from '../shared/certs.js';
import { parseCrl } from '../shared/crl.js';
import { parseSignedJson, type QeIdentity, type TdxCollateral, type TdxTcbInfo } from './collateral.js';

/** Intel's production PCS. */
export const INTEL_PCS_BASE_URL = 'https://api.trustedservices.intel.com';
/** Where Intel publishes the SGX Root CA CRL (the root certificate's CRL distribution point). */
export const INTEL_ROOT_CA_CRL_URL = 'https://certificates.trustedservices.intel.com/IntelSGXRootCA.der';

/** Options of {@link IntelPcsCollateralSource}. */
export interface IntelPcsOptions {
  /** Time for cache expiry. */
  clock: Clock;
  /** PCS base URL (http or https), default {@link INTEL_PCS_BASE_URL}. */
  baseUrl?: string;
  /** Root CA CRL URL, default {@link INTEL_ROOT_CA_CRL_URL}. */
  rootCrlUrl?: string;
  /** Which PCK CA's CRL to fetch: the CA that issues the platforms' PCK certificates. Default `platform`. */
  pckCa?: 'platform' | 'processor';
  /** Deadline of one request unless the caller passes `timeoutInMs`. Default 10 000 ms. */
  timeoutInMs?: number;
  /** Longest a document is cached even if its nextUpdate is later. Default 24 h. */
  maxAgeInMs?: number;
  /**
   * How long a document whose nextUpdate has already passed is kept, so a stale mirror or a skewed
   * clock does not turn every verification into a request. Default 60 000 ms.
   */
  staleRetryInMs?: number;
  /** Most TCB info documents (FMSPCs) kept; the oldest is evicted first. Default 256. */
  maxFmspcs?: number;
  /** Largest response accepted. Default 4 MiB. */
  maxBodyBytes?: number;
}

interface Cached<T> {
  value: T;
  /** Epoch ms at which the document is fetched again. */
  expiresAt: number;
}

interface SignedDoc {
  body: Uint8Array;
  chain: X509Certificate[];
  nextUpdate: Date | undefined;
}

const FMSPC = /^[0-9a-fA-F]{12}$/;

const errMsg = (err: unknown) => messageOf(err);

/**
 * Checks an http(s) URL that request paths are appended to (or that is fetched as is): absolute,
 * no query or fragment — not even an empty one, a bare `?` or `#` would swallow the appended path —
 * and no whitespace. Returns its normalised form (origin and path, without trailing slashes), so the
 * requests go exactly where the check looked.
 * @throws ConfbootError `invalid-argument` naming `what`
 */
export function checkHttpUrl(value: string, what: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfbootError('invalid-argument', `${what} ${JSON.stringify(value)} is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new ConfbootError('invalid-argument', `${what} ${value}: want an http or https URL`);
  if (/[?#\s]/.test(value))
    throw new ConfbootError(
      'invalid-argument',
      `${what} ${JSON.stringify(value)}: must not have a query, fragment or whitespace`,
    );
  return `${url.origin}${url.pathname}`.replace(/\/+$/, '');
}

/**
 * Fetches, parses and caches TDX collateral from Intel PCS. Pass its {@link getCollateral} as
 * TdxValidatorConfig.getCollateral; keep one instance for the life of the service.
 */
export class IntelPcsCollateralSource {
  /** The PCS base URL in use (no trailing slash). */
  readonly baseUrl: string;
  /** The root CA CRL URL in use. */
  readonly rootCrlUrl: string;
  private readonly clock: Clock;
  private readonly pckCa: 'platform' | 'processor';
  private readonly timeoutInMs: number;
  private readonly maxAgeInMs: number;
  private readonly staleRetryInMs: number;
  private readonly maxFmspcs: number;
  private readonly maxBodyBytes: number;
  private readonly cache = new Map<string, Cached<SignedDoc>>();
  private readonly inflight = new Map<string, Promise<SignedDoc>>();

  constructor(options: IntelPcsOptions) {
    this.clock = options.clock;
    this.baseUrl = checkHttpUrl(options.baseUrl ?? INTEL_PCS_BASE_URL, 'Intel PCS base URL');
    this.rootCrlUrl = checkHttpUrl(options.rootCrlUrl ?? INTEL_ROOT_CA_CRL_URL, 'Intel root CA CRL URL');
    this.pckCa = options.pckCa ?? 'platform';
    this.timeoutInMs = options.timeoutInMs ?? 10_000;
    this.maxAgeInMs = options.maxAgeInMs ?? 24 * 3600_000;
    this.staleRetryInMs = options.staleRetryInMs ?? 60_000;
    this.maxFmspcs = options.maxFmspcs ?? 256;
    this.maxBodyBytes = options.maxBodyBytes ?? 4 << 20;
  }

  /**
   * Returns the collateral for `fmspc` (12 hex digits), from the cache where every document is
   * still fresh, else fetched from PCS. The caller's signal stops only this caller's wait; a fetch
   * other callers share runs on.
   * @throws ConfbootError `invalid-argument` for a malformed FMSPC (before any request);
   *   `unavailable` for network failures, HTTP 5xx/429 and malformed responses;
   *   `deadline-exceeded` on timeout; for other HTTP errors the status's code (404
   *   `failed-precondition`, e.g. an FMSPC Intel does not know; 400 `invalid-argument`; 401/403
   *   `permission-denied`, e.g. a mirror that wants credentials). Every message names the URL.
   */
  getCollateral = async (fmspc: string, options?: CallOptions): Promise<TdxCollateral> => {
    if (typeof fmspc !== 'string' || !FMSPC.test(fmspc))
      throw new ConfbootError(
        'invalid-argument',
        `getting TDX collateral from Intel PCS: FMSPC ${JSON.stringify(fmspc)} is not 6 bytes of hex`,
      );
    const id = fmspc.toLowerCase();
    const [tcb, qe, pckCrl, rootCrl] = await Promise.all([
      this.document(`tcb/${id}`, options, (t) => this.fetchTcbInfo(id, t)),
      this.document('qe', options, (t) => this.fetchQeIdentity(t)),
      this.document('pckcrl', options, (t) => this.fetchPckCrl(t)),
      this.document('rootcrl', options, (t) => this.fetchRootCrl(t)),
    ]);
    return {
      tcbInfo: tcb.body,
      tcbInfoIssuerChain: tcb.chain,
      qeIdentity: qe.body,
      qeIdentityIssuerChain: qe.chain,
      pckCrl: pckCrl.body,
      pckCrlIssuerChain: pckCrl.chain,
      rootCrl: rootCrl.body,
    };
  };

  /** The URL of the TCB info for `fmspc` (validated hex). */
  tcbInfoUrl(fmspc: string): string {
    return `${this.baseUrl}/tdx/certification/v4/tcb?fmspc=${fmspc}`;
  }

  /** The URL of the TD_QE identity. */
  qeIdentityUrl(): string {
    return `${this.baseUrl}/tdx/certification/v4/qe/identity`;
  }

  /** The URL of the PCK CRL. */
  pckCrlUrl(): string {
    return `${this.baseUrl}/sgx/certification/v4/pckcrl?ca=${this.pckCa}&encoding=der`;
  }

  /** Cached, fresh document `key`, else the (shared) fetch of it. */
  private document(
    key: string,
    options: CallOptions | undefined,
    fetch: (timeoutInMs: number) => Promise<SignedDoc>,
  ): Promise<SignedDoc> {
    const hit = this.cache.get(key);
    if (hit !== undefined && this.clock.now().getTime() < hit.expiresAt) return Promise.resolve(hit.value);
    let pending = this.inflight.get(key);
    if (pending === undefined) {
      const started = fetch(options?.timeoutInMs ?? this.timeoutInMs).then((doc) => {
        this.store(key, doc);
        return doc;
      });
      pending = started.finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    const signal = options?.signal;
    return untilAborted(
      pending,
      signal,
      () =>
        new ConfbootError('unavailable', 'getting TDX collateral from Intel PCS: aborted by caller', {
          cause: signal?.reason,
        }),
    );
  }

  private store(key: string, doc: SignedDoc): void {
    const now = this.clock.now().getTime();
    const next = doc.nextUpdate?.getTime() ?? Number.POSITIVE_INFINITY;
    const expiresAt = next > now ? Math.min(next, now + this.maxAgeInMs) : now + this.staleRetryInMs;
    this.cache.delete(key);
    this.cache.set(key, { value: doc, expiresAt });
    if (!key.startsWith('tcb/')) return;
    const tcbKeys = [...this.cache.keys()].filter((k) => k.startsWith('tcb/'));
    for (const old of tcbKeys.slice(0, Math.max(0, tcbKeys.length - this.maxFmspcs))) this.cache.delete(old);
  }

  private async fetchTcbInfo(fmspc: string, timeoutInMs: number): Promise<SignedDoc> {
    const url = this.tcbInfoUrl(fmspc);
    const what = `Intel PCS TCB info for FMSPC ${fmspc}`;
    const res = await this.get(url, what, timeoutInMs);
    return parsed(what, url, () => {
      const chain = issuerChain(res, 'TCB-Info-Issuer-Chain');
      const doc = parseSignedJson<TdxTcbInfo>(res.body, 'tcbInfo');
      const served = doc.value.fmspc;
      if (typeof served !== 'string' || served.toLowerCase() !== fmspc)
        throw new Error(`TCB info is for FMSPC ${JSON.stringify(served)}, not ${fmspc}`);
      return { body: res.body, chain, nextUpdate: jsonDate(doc.value.nextUpdate, 'tcbInfo.nextUpdate') };
    });
  }

  private async fetchQeIdentity(timeoutInMs: number): Promise<SignedDoc> {
    const url = this.qeIdentityUrl();
    const what = 'Intel PCS TD_QE identity';
    const res = await this.get(url, what, timeoutInMs);
    return parsed(what, url, () => {
      const chain = issuerChain(res, 'SGX-Enclave-Identity-Issuer-Chain');
      const doc = parseSignedJson<QeIdentity>(res.body, 'enclaveIdentity');
      return {
        body: res.body,
        chain,
        nextUpdate: jsonDate(doc.value.nextUpdate, 'enclaveIdentity.nextUpdate'),
      };
    });
  }

  private async fetchPckCrl(timeoutInMs: number): Promise<SignedDoc> {
    const url = this.pckCrlUrl();
    const what = `Intel PCS PCK ${this.pckCa} CA CRL`;
    const res = await this.get(url, what, timeoutInMs);
    const nextUpdate = await crlNextUpdate(res.body);
    return parsed(what, url, () => {
      const chain = issuerChain(res, 'SGX-PCK-CRL-Issuer-Chain');
      return { body: res.body, chain, nextUpdate: nextUpdate() };
    });
  }

  private async fetchRootCrl(timeoutInMs: number): Promise<SignedDoc> {
    const url = this.rootCrlUrl;
    const what = 'Intel SGX Root CA CRL';
    const res = await this.get(url, what, timeoutInMs);
    const nextUpdate = await crlNextUpdate(res.body);
    return parsed(what, url, () => ({
      body: res.body,
      chain: [],
      nextUpdate: nextUpdate(),
    }));
  }

  /** One GET with a deadline; every failure is a ConfbootError naming the URL. */
  private async get(url: string, what: string, timeoutInMs: number): Promise<HttpResponse> {
    const timeout = AbortSignal.timeout(timeoutInMs);
    let res: HttpResponse;
    try {
      res = await httpRequest({ url, signal: timeout, maxBodyBytes: this.maxBodyBytes });
    } catch (err) {
      if (timeout.aborted)
        throw new ConfbootError(
          'deadline-exceeded',
          `fetching ${what}: GET ${url}: timed out after ${timeoutInMs} ms`,
          { cause: err },
        );
      throw new ConfbootError('unavailable', `fetching ${what}: GET ${url}: ${errMsg(err)}`, { cause: err });
    }
    try {
      return expectOk(res, `GET ${url}`);
    } catch (err) {
      if (!isConfbootError(err)) throw err;
      throw new ConfbootError(err.code, `fetching ${what}: ${err.message}`, { cause: err });
    }
  }
}

/**
 * Parses a fetched CRL (asynchronously: @peculiar/x509 loads on the first CRL) ahead of
 * {@link parsed}: its nextUpdate as a function that throws the parse error, so that parsed() reports
 * it as a malformed response, after an issuer-chain error, exactly where a synchronous parse would.
 */
async function crlNextUpdate(body: Uint8Array): Promise<() => Date | undefined> {
  try {
    const { nextUpdate } = await parseCrl(body);
    return () => nextUpdate;
  } catch (err) {
    return () => {
      throw err;
    };
  }
}

/** Runs `parse`, turning its failure into an `unavailable` error naming the document and URL. */
function parsed(what: string, url: string, parse: () => SignedDoc): SignedDoc {
  try {
    return parse();
  } catch (err) {
    throw new ConfbootError(
      'unavailable',
      `fetching ${what}: GET ${url}: malformed response: ${errMsg(err)}`,
      {
        cause: err,
      },
    );
  }
}

/** The certificates of a URL-encoded PEM chain header; throws unless it holds at least one. */
function issuerChain(res: HttpResponse, header: string): X509Certificate[] {
  const raw = res.headers[header.toLowerCase()];
  if (raw === undefined) throw new Error(`no ${header} header`);
  if (typeof raw !== 'string') throw new Error(`${header} header appears more than once`);
  let pem: string;
  try {
    pem = decodeURIComponent(raw);
  } catch {
    throw new Error(`${header} header is not URL-encoded`);
  }
  const chain = loadCertificates(pem, `${header} certificate`);
  if (chain.length === 0) throw new Error(`${header} header holds no PEM certificate`);
  return chain;
}

function jsonDate(value: unknown, field: string): Date {
  const d = typeof value === 'string' ? new Date(value) : new Date(Number.NaN);
  if (Number.isNaN(d.getTime())) throw new Error(`${field} ${JSON.stringify(value)} is not a date`);
  return d;
}
