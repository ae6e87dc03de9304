/**
 * SIMULATION of what an Azure TDX CVM has and this machine does not (no TDX hardware, no Azure):
 *  - the TDX module: a TDREPORT_STRUCT over chosen report data, with consistent TEE_TCB_INFO and
 *    TDINFO hashes (the MAC stays zero: only the CPU can make or check it);
 *  - Azure's HCL: an HCL report of type 4 (TDX) whose TDREPORT binds the runtime data;
 *  - Azure IMDS `/acc/tdquote`: a FAKE loopback HTTP server playing the host's quoting enclave,
 *    which turns the TDREPORT it is sent into a TDX quote signed under a FAKE Intel PKI.
 * Used by the azure-tdx issuer test and the join-service end-to-end test.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { buildHclReport } from '../../../support/azure-hcl.js';
import { type FakeIntelPki, signTdxQuote } from './fake-intel-pki.js';

/** XFAM of simulated TDREPORTs (the value the real Azure TDX vector carries). */
export const SIM_XFAM = Buffer.from('e718060000000000', 'hex');
/** MRTD of simulated TDREPORTs. */
export const SIM_MR_TD = Buffer.alloc(48, 0x7d);

/** SIMULATED TDX module: a 1024-byte TDREPORT over `reportData`. */
export function simulatedTdReport(reportData: Uint8Array): Uint8Array {
  const r = Buffer.alloc(1024);
  r[0] = 0x81; // REPORTTYPE.TYPE = TDX
  const teeTcbInfo = r.subarray(256, 495);
  Buffer.from('ff03000000000000', 'hex').copy(teeTcbInfo, 0); // valid fields
  Buffer.from([3, 0, 5]).copy(teeTcbInfo, 8); // TEE_TCB_SVN
  Buffer.alloc(48, 0x5e).copy(teeTcbInfo, 24); // MRSEAM
  const tdInfo = r.subarray(512, 1024);
  SIM_XFAM.copy(tdInfo, 8);
  SIM_MR_TD.copy(tdInfo, 16);
  for (let i = 0; i < 4; i++) Buffer.alloc(48, 0xa0 + i).copy(tdInfo, 208 + 48 * i);
  createHash('sha384').update(teeTcbInfo).digest().copy(r, 32);
  createHash('sha384').update(tdInfo).digest().copy(r, 80);
  Buffer.from(reportData).copy(r, 128);
  return r;
}

/** SIMULATED HCL report of a TDX CVM carrying `runtime`, whose TDREPORT binds `bound`. */
export function simulatedHclTdxReport(runtime: Uint8Array, bound: Uint8Array = runtime): Uint8Array {
  const reportData = new Uint8Array(64);
  reportData.set(createHash('sha256').update(bound).digest());
  return buildHclReport(simulatedTdReport(reportData), 4, runtime);
}

/** The quote a quoting enclave makes of a TDREPORT: its TD measurements and report data. */
export function quoteOfTdReport(pki: FakeIntelPki, r: Uint8Array): Uint8Array {
  const teeTcbInfo = r.subarray(256, 495);
  const tdInfo = r.subarray(512, 1024);
  const at = (b: Uint8Array, off: number, n: number) => Uint8Array.from(b.subarray(off, off + n));
  return signTdxQuote(pki, {
    teeTcbSvn: at(teeTcbInfo, 8, 16),
    mrSeam: at(teeTcbInfo, 24, 48),
    mrSignerSeam: at(teeTcbInfo, 72, 48),
    seamAttributes: at(teeTcbInfo, 120, 8),
    tdAttributes: at(tdInfo, 0, 8),
    xfam: at(tdInfo, 8, 8),
    mrTd: at(tdInfo, 16, 48),
    mrConfigId: at(tdInfo, 64, 48),
    mrOwner: at(tdInfo, 112, 48),
    mrOwnerConfig: at(tdInfo, 160, 48),
    rtmrs: [at(tdInfo, 208, 48), at(tdInfo, 256, 48), at(tdInfo, 304, 48), at(tdInfo, 352, 48)],
    reportData: at(r, 128, 64),
  });
}

/**
 * An azure-tdx attestation config accepting the simulated platform under `pki`'s root: zero PCRs 4
 * and 15 (a fresh swtpm), minimum SVNs 0, Intel's QE vendor ID, {@link SIM_XFAM}; `extra` overrides.
 */
export function simulatedAzureTdxConfig(pki: FakeIntelPki, extra: Record<string, unknown> = {}): string {
  const zero = '00'.repeat(32);
  return JSON.stringify({
    measurements: { 4: zero, 15: zero },
    qeSVN: 0,
    pceSVN: 0,
    teeTCBSVN: '00'.repeat(16),
    qeVendorID: '939a7233f79c4ca9940a0db3957f0607',
    xfam: SIM_XFAM.toString('hex'),
    intelRootKey: pki.rootPem,
    ...extra,
  });
}

/** One request the fake IMDS received. */
export interface ImdsRequest {
  method: string;
  url: string;
  contentType: string;
  body: string;
}

/** How the fake IMDS answers a TDREPORT. */
export type ImdsAnswer = (tdReport: Uint8Array) => { status: number; body: string };

/** The honest host: quotes exactly the TDREPORT it was sent, under `pki()`. */
export const honestQuotingEnclave =
  (pki: () => FakeIntelPki): ImdsAnswer =>
  (r) => ({
    status: 200,
    body: JSON.stringify({ quote: Buffer.from(quoteOfTdReport(pki(), r)).toString('base64url') }),
  });

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** FAKE Azure IMDS serving `/acc/tdquote` on 127.0.0.1 (random port); records every request. */
export class FakeImds {
  readonly requests: ImdsRequest[] = [];
  /** Set per test; a body that is not `{"report": base64url}` gets 400. */
  answer: ImdsAnswer;

  private constructor(
    private readonly server: Server,
    readonly url: string,
    answer: ImdsAnswer,
  ) {
    this.answer = answer;
  }

  /** Starts the server; `answer` is the initial behaviour. */
  static async start(answer: ImdsAnswer): Promise<FakeImds> {
    let self: FakeImds | undefined;
    const server = createServer((req, res) => {
      void readBody(req).then((body) => {
        const imds = self as FakeImds;
        imds.requests.push({
          method: req.method ?? '',
          url: req.url ?? '',
          contentType: String(req.headers['content-type']),
          body,
        });
        let report: Uint8Array;
        try {
          report = Buffer.from((JSON.parse(body) as { report: string }).report, 'base64url');
        } catch {
          res.writeHead(400).end('bad request');
          return;
        }
        const a = imds.answer(report);
        res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const addr = server.address();
    self = new FakeImds(
      server,
      `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`,
      answer,
    );
    return self;
  }

  /** The TDREPORT of the last request. */
  lastReport(): Buffer {
    const body = this.requests.at(-1)?.body ?? '{}';
    return Buffer.from((JSON.parse(body) as { report: string }).report, 'base64url');
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}
