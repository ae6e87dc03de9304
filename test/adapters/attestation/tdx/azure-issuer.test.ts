/**
 * The azure-tdx Issuer (src/adapters/attestation/tdx/azure-issuer.ts), issued for real and validated
 * by the repo's own azure-tdx validator (buildValidator with the committed vTPM quote verifier):
 *  - the TPM is a REAL swtpm driven through Tpm2ToolsTpm (AK at 0x81000003, quotes, and the HCL
 *    report read back from NV index 0x01400001 with the real tpm2_nvread);
 *  - Azure's HCL and the TDX module are SIMULATED (no TDX hardware here): the test writes an HCL
 *    report whose TDREPORT binds runtime data naming the swtpm AK into the NV index;
 *  - Azure IMDS `/acc/tdquote` is a local FAKE HTTP server playing the host's quoting enclave: it
 *    turns the TDREPORT it is sent into a TDX quote signed under a FAKE Intel PCK PKI
 *    (fake-intel-pki.ts), whose root the validator pins.
 * The REAL Azure TDX HCL report vector also goes through the issuer: its runtime data names a real
 * Azure AK, so the validator must refuse it for hcl-ak.
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AZURE_HCL_AK_HANDLE,
  AZURE_HCL_REPORT_NV_INDEX,
  tpm2NvReader,
} from '../../../../src/adapters/attestation/snp/issuers.js';
import { parseVtpmDocument } from '../../../../src/adapters/attestation/snp/vtpm-document.js';
import {
  azureTdxInstanceInfo,
  createAzureTdxIssuer,
  imdsTdQuoteGetter,
} from '../../../../src/adapters/attestation/tdx/azure-issuer.js';
import { parseTdxQuote } from '../../../../src/adapters/attestation/tdx/quote.js';
import { parseTpmtPublic } from '../../../../src/adapters/attestation/vtpm/tpm2.js';
import { type SwtpmInstance, startSwtpm } from '../../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { buildValidator } from '../../../../src/app/attestation/validators.js';
import { isAttestationError, isConfbootError } from '../../../../src/ports/errors.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { buildHclReport, hclRuntimeData, writeNvIndex } from '../../../support/azure-hcl.js';
import { describeVectors, vec } from '../snp/vectors.js';
import { createFakeIntelPki, type FakeIntelPki, signTdxQuote } from './fake-intel-pki.js';

const ZERO32 = '00'.repeat(32);
const XFAM = Buffer.from('e718060000000000', 'hex');
const MR_TD = Buffer.alloc(48, 0x7d);
const nonce = Buffer.alloc(32, 0x5a);
const userData = Buffer.from('sha256-of-the-tls-key');

/**
 * SIMULATED TDX module: a TDREPORT_STRUCT (1024 bytes) over `reportData` with consistent
 * TEE_TCB_INFO and TDINFO hashes; the MAC stays zero (only the CPU can make or check it).
 */
function tdReport(reportData: Uint8Array): Uint8Array {
  const r = Buffer.alloc(1024);
  r[0] = 0x81; // REPORTTYPE.TYPE = TDX
  const teeTcbInfo = r.subarray(256, 495);
  Buffer.from('ff03000000000000', 'hex').copy(teeTcbInfo, 0); // valid fields
  Buffer.from([3, 0, 5]).copy(teeTcbInfo, 8); // TEE_TCB_SVN
  Buffer.alloc(48, 0x5e).copy(teeTcbInfo, 24); // MRSEAM
  const tdInfo = r.subarray(512, 1024);
  XFAM.copy(tdInfo, 8);
  MR_TD.copy(tdInfo, 16);
  for (let i = 0; i < 4; i++) Buffer.alloc(48, 0xa0 + i).copy(tdInfo, 208 + 48 * i);
  createHash('sha384').update(teeTcbInfo).digest().copy(r, 32);
  createHash('sha384').update(tdInfo).digest().copy(r, 80);
  Buffer.from(reportData).copy(r, 128);
  return r;
}

/** SIMULATED Azure HCL report of a TDX CVM whose TDREPORT binds `bound` and that carries `runtime`. */
function hclTdxReport(runtime: Uint8Array, bound: Uint8Array = runtime): Uint8Array {
  const reportData = new Uint8Array(64);
  reportData.set(createHash('sha256').update(bound).digest());
  return buildHclReport(tdReport(reportData), 4, runtime);
}

/** The quote a quoting enclave makes of a TDREPORT: its TD measurements and report data. */
function quoteOfTdReport(pki: FakeIntelPki, r: Uint8Array): Uint8Array {
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

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function rejectionOf(p: Promise<unknown>): Promise<{ check: string; failed: string[] }> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isAttestationError(err)) throw new Error(`expected an AttestationError, got ${String(err)}`);
  return { check: err.check, failed: err.checks.filter((c) => !c.ok).map((c) => c.name) };
}

describe('azure-tdx issuer: real swtpm (AK at 0x81000003, HCL report in NV 0x01400001) + SIMULATED HCL/TDX module, FAKE IMDS quoting enclave under a FAKE Intel PKI', {
  timeout: 30_000,
}, () => {
  let swtpm: SwtpmInstance;
  let tpm: Tpm2ToolsTpm;
  let akPem: string;
  let pki: FakeIntelPki;
  let otherPki: FakeIntelPki;
  let imds: Server;
  let imdsUrl: string;
  /** What the fake IMDS does with the next request. */
  let answer: (tdReportBytes: Uint8Array) => { status: number; body: string };
  const requests: { method: string; url: string; contentType: string; body: string }[] = [];

  beforeAll(async () => {
    [swtpm, pki, otherPki] = await Promise.all([startSwtpm(), createFakeIntelPki(), createFakeIntelPki()]);
    // The HCL (simulated) provisions the AK at 0x81000003; the issuer's TPM only uses it.
    await new Tpm2ToolsTpm({ tcti: swtpm.tcti, akHandle: AZURE_HCL_AK_HANDLE }).attestationKeyPublic();
    tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti, akHandle: AZURE_HCL_AK_HANDLE, createAttestationKey: false });
    akPem = parseTpmtPublic(await tpm.attestationKeyPublic())
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    imds = createServer((req, res) => {
      void readBody(req).then((body) => {
        requests.push({
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
        const a = answer(report);
        res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.body);
      });
    });
    await new Promise<void>((resolve) => imds.listen(0, '127.0.0.1', resolve));
    const addr = imds.address();
    imdsUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  }, 60_000);
  afterAll(async () => {
    await new Promise((resolve) => imds?.close(resolve));
    await swtpm?.stop();
  });

  /** The honest host: quotes exactly the TDREPORT it was sent. */
  const honest = (under: () => FakeIntelPki) => (r: Uint8Array) => ({
    status: 200,
    body: JSON.stringify({ quote: Buffer.from(quoteOfTdReport(under(), r)).toString('base64url') }),
  });
  const writeHcl = (bytes: Uint8Array) => writeNvIndex(swtpm.tcti, AZURE_HCL_REPORT_NV_INDEX, bytes);
  const issuer = () =>
    createAzureTdxIssuer({
      tpm,
      readNvIndex: tpm2NvReader({ tcti: swtpm.tcti }),
      getQuote: imdsTdQuoteGetter({ baseUrl: imdsUrl, timeoutInMs: 5000 }),
    });
  const validator = (extra: Record<string, unknown> = {}) =>
    buildValidator(
      'azure-tdx',
      JSON.stringify({
        measurements: { 4: ZERO32, 15: ZERO32 },
        qeSVN: 0,
        pceSVN: 0,
        teeTCBSVN: '00'.repeat(16),
        qeVendorID: '939a7233f79c4ca9940a0db3957f0607',
        xfam: XFAM.toString('hex'),
        intelRootKey: pki.rootPem,
        ...extra,
      }),
      { clock: new FakeClock(new Date('2026-01-01T00:00:00Z')) },
    );

  it('issues a document the azure-tdx validator accepts: HCL report via tpm2_nvread, quote via IMDS /acc/tdquote', async () => {
    answer = honest(() => pki);
    await writeHcl(hclTdxReport(hclRuntimeData(akPem)));
    const doc = await issuer().issue(userData, nonce);
    const res = await validator().validate(doc, nonce);
    expect(res.checks.filter((c) => !c.ok)).toEqual([]);
    expect(res.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'quote-signature',
        'qe-report-signature',
        'pck-chain',
        'xfam',
        'hcl-runtime-data-hash',
        'hcl-ak',
        'ak-trust',
        'measurements',
      ]),
    );
    expect(Buffer.from(res.userData).equals(userData)).toBe(true);

    // What went over the wire: upstream's request and instance info shapes.
    const req = requests.at(-1);
    expect(req).toMatchObject({ method: 'POST', url: '/acc/tdquote', contentType: 'application/json' });
    const sent = JSON.parse(req?.body ?? '{}') as Record<string, string>;
    expect(Object.keys(sent)).toEqual(['report']);
    expect(sent.report).toMatch(/^[A-Za-z0-9_-]+$/); // base64url without padding
    expect(Buffer.from(sent.report as string, 'base64url')).toHaveLength(1024);
    const info = JSON.parse(Buffer.from(parseVtpmDocument(doc).instanceInfo).toString()) as Record<
      string,
      string
    >;
    expect(Object.keys(info)).toEqual(['AttestationReport', 'RuntimeData']);
    expect(parseTdxQuote(Buffer.from(info.AttestationReport as string, 'base64')).body.mrTd).toEqual(
      Uint8Array.from(MR_TD),
    );
    expect(Buffer.from(info.RuntimeData as string, 'base64').toString()).toBe(
      Buffer.from(hclRuntimeData(akPem)).toString(),
    );
  });

  it('the validator rejects a wrong nonce (extra-data) and a platform outside the policy (xfam)', async () => {
    answer = honest(() => pki);
    await writeHcl(hclTdxReport(hclRuntimeData(akPem)));
    const doc = await issuer().issue(userData, nonce);
    expect((await rejectionOf(validator().validate(doc, Buffer.alloc(32, 0x5b)))).check).toBe('extra-data');
    const xfam = await rejectionOf(validator({ xfam: 'e702060000000000' }).validate(doc, nonce));
    expect(xfam.failed).toEqual(['xfam']);
  });

  it('the validator rejects runtime data naming another AK (hcl-ak) or not bound by the TDREPORT (hcl-runtime-data-hash)', async () => {
    answer = honest(() => pki);
    const { generateKeyPairSync } = await import('node:crypto');
    const otherAk = generateKeyPairSync('rsa', { modulusLength: 2048 })
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    await writeHcl(hclTdxReport(hclRuntimeData(otherAk)));
    expect(
      (await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce))).failed,
    ).toEqual(['hcl-ak']);
    await writeHcl(hclTdxReport(hclRuntimeData(akPem), hclRuntimeData(otherAk)));
    expect(
      (await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce))).failed,
    ).toEqual(['hcl-runtime-data-hash']);
  });

  it('the validator rejects a quote from a platform under another Intel root (pck-chain)', async () => {
    answer = honest(() => otherPki);
    await writeHcl(hclTdxReport(hclRuntimeData(akPem)));
    const r = await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce));
    expect(r.failed).toContain('pck-chain');
  });

  it('refuses to issue when IMDS answers with a quote over other report data (stale or foreign quote)', async () => {
    answer = (r) => {
      const other = Uint8Array.from(r);
      other[128] = (other[128] as number) ^ 0xff;
      return honest(() => pki)(other);
    };
    await writeHcl(hclTdxReport(hclRuntimeData(akPem)));
    const err = await issuer()
      .issue(userData, nonce)
      .catch((e: unknown) => e);
    expect(isConfbootError(err)).toBe(true);
    expect((err as Error).message).toContain(
      "getting the azure-tdx instance info: the quote's report data differs from the HCL report's",
    );
  });

  it('IMDS failures name the URL: 500 is unavailable, a body without a quote is internal', async () => {
    await writeHcl(hclTdxReport(hclRuntimeData(akPem)));
    answer = () => ({ status: 500, body: 'quote generation failed' });
    const down = await issuer()
      .issue(userData, nonce)
      .catch((e: unknown) => e);
    expect(isConfbootError(down) && down.code).toBe('unavailable');
    expect((down as Error).message).toMatch(
      /getting a TDX quote from http:\/\/127\.0\.0\.1:\d+\/acc\/tdquote: IMDS answered HTTP 500 \(quote generation failed\)/,
    );
    answer = () => ({ status: 200, body: '{"quote":"***"}' });
    const garbage = await issuer()
      .issue(userData, nonce)
      .catch((e: unknown) => e);
    expect(isConfbootError(garbage) && garbage.code).toBe('internal');
    expect((garbage as Error).message).toContain('IMDS quote is not base64url');
  });

  it('an HCL report of an SEV-SNP CVM is refused before IMDS is asked', async () => {
    const before = requests.length;
    await writeHcl(buildHclReport(new Uint8Array(1184), 2, hclRuntimeData(akPem)));
    const err = await issuer()
      .issue(userData, nonce)
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('failed-precondition');
    expect((err as Error).message).toContain('HCL report type is 2, want 4 (TDX)');
    expect(requests.length).toBe(before);
  });

  describeVectors('on the REAL Azure TDX HCL report', () => {
    it('quotes its TDREPORT; the validator refuses it because its runtime data names a real Azure AK (hcl-ak)', async () => {
      answer = honest(() => pki);
      const real = vec('constellation/azure-tdx/hclreport.bin');
      // 2600 bytes: more than swtpm's largest NV index (2048), so this NV read is SIMULATED in memory.
      const readNvIndex = async (index: number) => {
        expect(index).toBe(AZURE_HCL_REPORT_NV_INDEX);
        return Uint8Array.from(real);
      };
      const getQuote = imdsTdQuoteGetter({ baseUrl: imdsUrl, timeoutInMs: 5000 });
      const info =
        (await azureTdxInstanceInfo({ readNvIndex, getQuote })(new Uint8Array(32))) ?? new Uint8Array();
      const parsed = JSON.parse(Buffer.from(info).toString()) as Record<string, string>;
      const sentReport = Buffer.from(
        (JSON.parse(requests.at(-1)?.body ?? '{}') as { report: string }).report,
        'base64url',
      );
      expect(sentReport.equals(real.subarray(32, 1056))).toBe(true);
      expect(Buffer.from(parsed.RuntimeData as string, 'base64').toString()).toContain('HCLAkPub');

      const doc = await createAzureTdxIssuer({ tpm, readNvIndex, getQuote }).issue(userData, nonce);
      const r = await rejectionOf(validator().validate(doc, nonce));
      expect(r.failed).toEqual(['hcl-ak']);
    });
  });
});
