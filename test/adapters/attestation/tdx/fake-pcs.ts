/**
 * A FAKE Intel PCS for tests: an HTTP server on 127.0.0.1 (random free port) that serves the REAL
 * go-tdx-guest collateral of ../shared/testvectors (README §4) on the PCS v4 paths, with the
 * issuer chains in the headers Intel uses (URL-encoded PEM), and counts requests per path. Tests
 * change `routes` to serve errors or garbage, or to hold a response.
 */
import { createServer, type Server } from 'node:http';
import { freePort } from '../../../support/net.js';
import { vec } from '../snp/vectors.js';

/** The FMSPC of the collateral (and of tdx_prod_quote_SPR_E4.dat's PCK). */
export const FAKE_PCS_FMSPC = '50806f000000';
/** Paths the fake serves (as requested, with the query). */
export const PCS_PATHS = {
  tcb: `/tdx/certification/v4/tcb?fmspc=${FAKE_PCS_FMSPC}`,
  qe: '/tdx/certification/v4/qe/identity',
  pckCrl: '/sgx/certification/v4/pckcrl?ca=platform&encoding=der',
  rootCrl: '/IntelSGXRootCA.der',
} as const;

/** What the fake serves on one path. */
export interface PcsRoute {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** When set, the response waits until this promise resolves. */
  hold?: Promise<void>;
}

/** A go-tdx-guest testdata file. */
export const pcsVector = (f: string) => vec(`go-tdx-guest/testdata/${f}`);

const chainHeader = (f: string) => encodeURIComponent(pcsVector(f).toString('latin1'));

/** The four routes with the real collateral, as Intel serves it. */
export function realPcsRoutes(): Record<string, PcsRoute> {
  const json = { 'content-type': 'application/json' };
  const crl = { 'content-type': 'application/pkix-crl' };
  return {
    [PCS_PATHS.tcb]: {
      status: 200,
      headers: { ...json, 'TCB-Info-Issuer-Chain': chainHeader('tcbinfo_issuer_chain.pem') },
      body: pcsVector('sample_tcbInfo_response'),
    },
    [PCS_PATHS.qe]: {
      status: 200,
      headers: { ...json, 'SGX-Enclave-Identity-Issuer-Chain': chainHeader('qeidentity_issuer_chain.pem') },
      body: pcsVector('sample_qeIdentity_response'),
    },
    [PCS_PATHS.pckCrl]: {
      status: 200,
      headers: { ...crl, 'SGX-PCK-CRL-Issuer-Chain': chainHeader('pckcrl_issuer_chain.pem') },
      body: pcsVector('pckcrl'),
    },
    [PCS_PATHS.rootCrl]: { status: 200, headers: crl, body: pcsVector('rootcrl.der') },
  };
}

/** A running fake PCS. */
export interface FakePcs {
  /** `http://127.0.0.1:PORT` (the PCS base URL). */
  base: string;
  /** The root CA CRL URL on the fake. */
  rootCrlUrl: string;
  /** What each path serves; unknown paths answer 404. Replace entries freely. */
  routes: Record<string, PcsRoute>;
  /** Requests seen on `path`. */
  count(path: string): number;
  /** Requests seen in all. */
  total(): number;
  /** Restores the real routes and zeroes the counters. */
  reset(): void;
  close(): Promise<void>;
}

/** Starts a fake PCS serving the real collateral. */
export async function startFakePcs(): Promise<FakePcs> {
  const requests = new Map<string, number>();
  let server: Server | undefined;
  const pcs: FakePcs = {
    base: '',
    rootCrlUrl: '',
    routes: realPcsRoutes(),
    count: (path) => requests.get(path) ?? 0,
    total: () => [...requests.values()].reduce((a, b) => a + b, 0),
    reset: () => {
      pcs.routes = realPcsRoutes();
      requests.clear();
    },
    close: async () => {
      server?.closeAllConnections();
      await new Promise((resolve) => server?.close(resolve));
    },
  };
  server = createServer((req, res) => {
    const path = req.url ?? '';
    requests.set(path, pcs.count(path) + 1);
    const route = pcs.routes[path];
    const send = () => {
      if (route === undefined) res.writeHead(404, { 'content-type': 'text/plain' }).end('no such FMSPC');
      else res.writeHead(route.status, route.headers).end(route.body);
    };
    if (route?.hold) void route.hold.then(send);
    else send();
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server?.listen(port, '127.0.0.1', resolve));
  pcs.base = `http://127.0.0.1:${port}`;
  pcs.rootCrlUrl = `${pcs.base}${PCS_PATHS.rootCrl}`;
  return pcs;
}
