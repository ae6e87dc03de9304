/**
 * End to end over attested TLS on loopback: an azure-tdx node joins the join service built with the
 * production validator wiring (validatorBuilder → UpdatableValidator → the azure-tdx validator with
 * collateral), with the real key service and CA and SIMULATED Kubernetes.
 *  - The node's TPM is a REAL swtpm (AK at 0x81000003, quotes, tpm2_nvread of NV 0x01400001).
 *  - Azure's HCL, the TDX module and IMDS `/acc/tdquote` are SIMULATED (azure-tdx-simulation.ts):
 *    the quote is signed under a FAKE Intel PKI whose root the attestation config pins, and whose
 *    collateral (TCB info, QE identity, CRLs) the service gets through `getTdxCollateral`.
 * A node whose TDX platform is revoked is refused in the handshake and gets no key.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  AZURE_HCL_AK_HANDLE,
  AZURE_HCL_REPORT_NV_INDEX,
  tpm2NvReader,
} from '../../../src/adapters/attestation/azure/nv-reader.js';
import { imdsTdQuoteGetter } from '../../../src/adapters/attestation/azure/tdquote.js';
import { createAzureTdxIssuer } from '../../../src/adapters/attestation/tdx/azure-issuer.js';
import type { TdxCollateral } from '../../../src/adapters/attestation/tdx/collateral.js';
import { UpdatableValidator } from '../../../src/adapters/attestation/updatable/updatable-validator.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { parseTpmtPublic } from '../../../src/adapters/tpm/tpm2-public.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { validatorBuilder } from '../../../src/app/join-service/production.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { isAttestationError } from '../../../src/ports/errors.js';
import {
  FakeImds,
  honestQuotingEnclave,
  simulatedAzureTdxConfig,
  simulatedHclTdxReport,
} from '../../adapters/attestation/tdx/azure-tdx-simulation.js';
import {
  createFakeIntelPki,
  type FakeIntelPki,
  signCollateral,
} from '../../adapters/attestation/tdx/fake-intel-pki.js';
import { hclRuntimeData, writeNvIndex } from '../../support/azure-hcl.js';
import { useTmpDirs } from '../../support/tmp.js';
import { rejectionOf, startHarness, waitFor } from './harness.js';

const tmp = useTmpDirs('confboot-join-service-tdx-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const clock = new SystemClock();
const DAY = 86_400_000;

describe('join service with the real azure-tdx validator and collateral (real swtpm node, SIMULATED HCL/TDX/IMDS, FAKE Intel PKI, simulated Kubernetes)', {
  timeout: 60_000,
}, () => {
  let swtpm: SwtpmInstance;
  let tpm: Tpm2ToolsTpm;
  let pcr4: string;
  let pki: FakeIntelPki;
  let imds: FakeImds;

  beforeAll(async () => {
    [swtpm, pki] = await Promise.all([startSwtpm(), createFakeIntelPki()]);
    await new Tpm2ToolsTpm({ tcti: swtpm.tcti, akHandle: AZURE_HCL_AK_HANDLE }).attestationKeyPublic();
    tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti, akHandle: AZURE_HCL_AK_HANDLE, createAttestationKey: false });
    const akPem = parseTpmtPublic(await tpm.attestationKeyPublic())
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    await writeNvIndex(swtpm.tcti, AZURE_HCL_REPORT_NV_INDEX, simulatedHclTdxReport(hclRuntimeData(akPem)));
    imds = await FakeImds.start(honestQuotingEnclave(() => pki));
    // The node's boot chain: the join service requires a boot-chain PCR at a measured value.
    await tpm.pcrEvent(4, new TextEncoder().encode('azure-tdx image boot loader'));
    pcr4 = Buffer.from((await tpm.readPcrs([4])).get(4) as Uint8Array).toString('hex');
  }, 60_000);
  afterAll(async () => {
    await imds?.close();
    await swtpm?.stop();
  });

  async function service(collateral: TdxCollateral) {
    const dir = tmp();
    const configPath = join(dir, 'attestationConfig');
    writeFileSync(
      configPath,
      simulatedAzureTdxConfig(pki, { measurements: { 4: pcr4, 15: '00'.repeat(32) } }),
    );
    const fmspcs: string[] = [];
    const validator = await UpdatableValidator.start({
      path: configPath,
      build: validatorBuilder(
        'azure-tdx',
        {
          getTdxCollateral: async (fmspc) => {
            fmspcs.push(fmspc);
            return collateral;
          },
        },
        clock,
        silentLogger,
      ),
      logger: silentLogger,
    });
    cleanups.push(() => validator.close());
    const h = await startHarness(tmp(), { validators: [validator] });
    cleanups.push(() => h.stop());
    return { h, fmspcs };
  }

  const node = () =>
    createAzureTdxIssuer({
      oid: variantOid('azure-tdx'),
      tpm,
      readNvIndex: tpm2NvReader({ tcti: swtpm.tcti }),
      getQuote: imdsTdQuoteGetter({ baseUrl: imds.url, timeoutInMs: 10_000 }),
    });
  const window = () => ({
    issueDate: new Date(Date.now() - DAY),
    nextUpdate: new Date(Date.now() + 30 * DAY),
  });

  it('issues a join ticket to the azure-tdx node; the quote was checked against the collateral of its FMSPC', async () => {
    const { h, fmspcs } = await service(await signCollateral(pki, window()));
    const ticket = await h.client(node()).issueJoinTicket(h.endpoint, await h.joinRequest('tdx-worker-1'));
    expect(ticket.stateDiskKey).toHaveLength(32);
    expect(fmspcs).toEqual([Buffer.from(pki.platform.fmspc).toString('hex')]);
    await waitFor(() => h.logs.audits().length === 1, 'issue audit');
    expect(h.logs.audits().map((a) => [a.rpc, a.variant, a.outcome])).toEqual([
      ['IssueJoinTicket', 'azure-tdx', 'issued'],
    ]);
  });

  it('refuses the node in the handshake when its PCK certificate is revoked (pck-crl): no key, one refusal audit', async () => {
    const revoked = await signCollateral(pki, { ...window(), revokedPckSerials: [pki.serials.pck] });
    const { h } = await service(revoked);
    const err = await rejectionOf(
      h.client(node()).issueJoinTicket(h.endpoint, await h.joinRequest('tdx-worker-2')),
    );
    expect(isAttestationError(err)).toBe(true);
    // The node learns the check; the service's audit names the revoked serial.
    expect(err.message).toMatch(/refused by the peer \(check pck-crl\): pck-crl$/);
    expect(h.kms.calls).toBe(0);
    await waitFor(() => h.logs.audits().length === 1, 'refusal audit');
    expect(h.logs.audits().map((a) => a.outcome)).toEqual(['refused']);
    expect(String(h.logs.audits()[0]?.detail)).toMatch(/PCK certificate serial [0-9A-F]+ is revoked/);
  });
});
