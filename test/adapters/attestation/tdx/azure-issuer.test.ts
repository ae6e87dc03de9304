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
import { generateKeyPairSync } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AZURE_HCL_AK_HANDLE,
  AZURE_HCL_REPORT_NV_INDEX,
  tpm2NvReader,
} from '../../../../src/adapters/attestation/azure/nv-reader.js';
import { imdsTdQuoteGetter } from '../../../../src/adapters/attestation/azure/tdquote.js';
import { parseVtpmDocument } from '../../../../src/adapters/attestation/shared/cvm-document.js';
import {
  azureTdxInstanceInfo,
  createAzureTdxIssuer,
} from '../../../../src/adapters/attestation/tdx/azure-issuer.js';
import { parseTdxQuote } from '../../../../src/adapters/attestation/tdx/quote.js';
import { type SwtpmInstance, startSwtpm } from '../../../../src/adapters/tpm/swtpm.js';
import { parseTpmtPublic } from '../../../../src/adapters/tpm/tpm2-public.js';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { variantOid } from '../../../../src/app/registry/index.js';
import { buildValidator } from '../../../../src/app/registry/validators.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import { buildHclReport, hclRuntimeData, writeNvIndex } from '../../../support/azure-hcl.js';
import { describeVectors, vec } from '../snp/vectors.js';
import {
  FakeImds,
  honestQuotingEnclave,
  SIM_MR_TD,
  simulatedAzureTdxConfig,
  simulatedHclTdxReport,
} from './azure-tdx-simulation.js';
import { createFakeIntelPki, type FakeIntelPki } from './fake-intel-pki.js';

const nonce = Buffer.alloc(32, 0x5a);
const userData = Buffer.from('sha256-of-the-tls-key');

const rejectionOf = attestationRejection;

describe('azure-tdx issuer: real swtpm (AK at 0x81000003, HCL report in NV 0x01400001) + SIMULATED HCL/TDX module, FAKE IMDS quoting enclave under a FAKE Intel PKI', {
  timeout: 30_000,
}, () => {
  let swtpm: SwtpmInstance;
  let tpm: Tpm2ToolsTpm;
  let akPem: string;
  let pki: FakeIntelPki;
  let otherPki: FakeIntelPki;
  let imds: FakeImds;

  beforeAll(async () => {
    [swtpm, pki, otherPki] = await Promise.all([startSwtpm(), createFakeIntelPki(), createFakeIntelPki()]);
    // The HCL (simulated) provisions the AK at 0x81000003; the issuer's TPM only uses it.
    await new Tpm2ToolsTpm({ tcti: swtpm.tcti, akHandle: AZURE_HCL_AK_HANDLE }).attestationKeyPublic();
    tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti, akHandle: AZURE_HCL_AK_HANDLE, createAttestationKey: false });
    akPem = parseTpmtPublic(await tpm.attestationKeyPublic())
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    imds = await FakeImds.start(honestQuotingEnclave(() => pki));
  }, 60_000);
  afterAll(async () => {
    await imds?.close();
    await swtpm?.stop();
  });

  const writeHcl = (bytes: Uint8Array) => writeNvIndex(swtpm.tcti, AZURE_HCL_REPORT_NV_INDEX, bytes);
  const issuer = () =>
    createAzureTdxIssuer({
      oid: variantOid('azure-tdx'),
      tpm,
      readNvIndex: tpm2NvReader({ tcti: swtpm.tcti }),
      getQuote: imdsTdQuoteGetter({ baseUrl: imds.url, timeoutInMs: 5000 }),
    });
  const validator = (extra: Record<string, unknown> = {}) =>
    buildValidator('azure-tdx', simulatedAzureTdxConfig(pki, extra), {
      clock: new FakeClock(new Date('2026-01-01T00:00:00Z')),
    });

  it('issues a document the azure-tdx validator accepts: HCL report via tpm2_nvread, quote via IMDS /acc/tdquote', async () => {
    imds.answer = honestQuotingEnclave(() => pki);
    await writeHcl(simulatedHclTdxReport(hclRuntimeData(akPem)));
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
    const req = imds.requests.at(-1);
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
      Uint8Array.from(SIM_MR_TD),
    );
    expect(Buffer.from(info.RuntimeData as string, 'base64').toString()).toBe(
      Buffer.from(hclRuntimeData(akPem)).toString(),
    );
  });

  it('the validator rejects a wrong nonce (extra-data) and a platform outside the policy (xfam)', async () => {
    imds.answer = honestQuotingEnclave(() => pki);
    await writeHcl(simulatedHclTdxReport(hclRuntimeData(akPem)));
    const doc = await issuer().issue(userData, nonce);
    expect((await rejectionOf(validator().validate(doc, Buffer.alloc(32, 0x5b)))).check).toBe('extra-data');
    const xfam = await rejectionOf(validator({ xfam: 'e702060000000000' }).validate(doc, nonce));
    expect(xfam.failed).toEqual(['xfam']);
  });

  it('the validator rejects runtime data naming another AK (hcl-ak) or not bound by the TDREPORT (hcl-runtime-data-hash)', async () => {
    imds.answer = honestQuotingEnclave(() => pki);
    const otherAk = generateKeyPairSync('rsa', { modulusLength: 2048 })
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    await writeHcl(simulatedHclTdxReport(hclRuntimeData(otherAk)));
    expect(
      (await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce))).failed,
    ).toEqual(['hcl-ak']);
    await writeHcl(simulatedHclTdxReport(hclRuntimeData(akPem), hclRuntimeData(otherAk)));
    expect(
      (await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce))).failed,
    ).toEqual(['hcl-runtime-data-hash']);
  });

  it('the validator rejects a quote from a platform under another Intel root (pck-chain)', async () => {
    imds.answer = honestQuotingEnclave(() => otherPki);
    await writeHcl(simulatedHclTdxReport(hclRuntimeData(akPem)));
    const r = await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce));
    expect(r.failed).toContain('pck-chain');
  });

  it('refuses to issue when IMDS answers with a quote over other report data (stale or foreign quote)', async () => {
    imds.answer = (r) => {
      const other = Uint8Array.from(r);
      other[128] = (other[128] as number) ^ 0xff;
      return honestQuotingEnclave(() => pki)(other);
    };
    await writeHcl(simulatedHclTdxReport(hclRuntimeData(akPem)));
    const err = await issuer()
      .issue(userData, nonce)
      .catch((e: unknown) => e);
    expect(isConfbootError(err)).toBe(true);
    expect((err as Error).message).toContain(
      "getting the azure-tdx instance info: the quote's report data differs from the HCL report's",
    );
  });

  it('IMDS failures name the URL: 500 is unavailable, a body without a quote is internal', async () => {
    await writeHcl(simulatedHclTdxReport(hclRuntimeData(akPem)));
    imds.answer = () => ({ status: 500, body: 'quote generation failed' });
    const down = await issuer()
      .issue(userData, nonce)
      .catch((e: unknown) => e);
    expect(isConfbootError(down) && down.code).toBe('unavailable');
    expect((down as Error).message).toMatch(
      /getting a TDX quote from http:\/\/127\.0\.0\.1:\d+\/acc\/tdquote: IMDS answered HTTP 500 \(quote generation failed\)/,
    );
    imds.answer = () => ({ status: 200, body: '{"quote":"***"}' });
    const garbage = await issuer()
      .issue(userData, nonce)
      .catch((e: unknown) => e);
    expect(isConfbootError(garbage) && garbage.code).toBe('internal');
    expect((garbage as Error).message).toContain('IMDS quote is not base64url');
  });

  it('an HCL report of an SEV-SNP CVM is refused before IMDS is asked', async () => {
    const before = imds.requests.length;
    await writeHcl(buildHclReport(new Uint8Array(1184), 2, hclRuntimeData(akPem)));
    const err = await issuer()
      .issue(userData, nonce)
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('failed-precondition');
    expect((err as Error).message).toContain('HCL report type is 2, want 4 (TDX)');
    expect(imds.requests.length).toBe(before);
  });

  describeVectors('on the REAL Azure TDX HCL report', () => {
    it('quotes its TDREPORT; the validator refuses it because its runtime data names a real Azure AK (hcl-ak)', async () => {
      imds.answer = honestQuotingEnclave(() => pki);
      const real = vec('constellation/azure-tdx/hclreport.bin');
      // 2600 bytes: more than swtpm's largest NV index (2048), so this NV read is SIMULATED in memory.
      const readNvIndex = async (index: number) => {
        expect(index).toBe(AZURE_HCL_REPORT_NV_INDEX);
        return Uint8Array.from(real);
      };
      const getQuote = imdsTdQuoteGetter({ baseUrl: imds.url, timeoutInMs: 5000 });
      const info =
        (await azureTdxInstanceInfo({ readNvIndex, getQuote })(new Uint8Array(32))) ?? new Uint8Array();
      const parsed = JSON.parse(Buffer.from(info).toString()) as Record<string, string>;
      const sentReport = imds.lastReport();
      expect(sentReport.equals(real.subarray(32, 1056))).toBe(true);
      expect(Buffer.from(parsed.RuntimeData as string, 'base64').toString()).toContain('HCLAkPub');

      const doc = await createAzureTdxIssuer({
        oid: variantOid('azure-tdx'),
        tpm,
        readNvIndex,
        getQuote,
      }).issue(userData, nonce);
      const r = await rejectionOf(validator().validate(doc, nonce));
      expect(r.failed).toEqual(['hcl-ak']);
    });
  });
});
