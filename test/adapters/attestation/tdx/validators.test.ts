/**
 * qemu-tdx and azure-tdx validators on the real go-tdx-guest quotes (whose report data cannot bind
 * a test's nonce, so these check the rejections and the wiring), and the qemu-tdx collateral fetch
 * against a FAKE Intel PKI.
 */
import { createHash } from 'node:crypto';
import { expect, it } from 'vitest';
import { createSnpTdxValidator } from '../../../../src/adapters/attestation/snp/factory.js';
import { variantOid } from '../../../../src/app/registry/index.js';
import { isAttestationError } from '../../../../src/ports/errors.js';
import type { MeasurementPolicy } from '../../../../src/ports/measurement-policy.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import { useTmpDirs } from '../../../support/tmp.js';
import { rsaTpmtPublic } from '../snp/tpmt-fixture.js';
import { describeVectors, vec } from '../snp/vectors.js';
import { createFakeIntelPki, signTdxQuote } from './fake-intel-pki.js';

const _tmp = useTmpDirs('confboot-tsm-');
const noMeasurements: MeasurementPolicy = { compare: () => [] };
const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

const rejection = attestationRejection;

describeVectors('TDX validators on real quotes', () => {
  const config = () => ({
    oid: variantOid('qemu-tdx'),
    root: vec('go-tdx-guest/trust/trusted_root.pem'),
    measurements: noMeasurements,
    clock: new FakeClock(new Date('2026-11-21T00:00:00Z')),
  });

  it('qemu-tdx: a quote whose report_data is not SHA256(userData ‖ nonce) is rejected on report-data only', async () => {
    const doc = Buffer.from(
      JSON.stringify({
        RawQuote: b64(vec('go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat')),
        UserData: b64(Buffer.from('u')),
      }),
    );
    const v = createSnpTdxValidator('qemu-tdx', config());
    expect(v.oid).toBe('1.3.9900.5.99');
    const err = await v.validate(doc, Buffer.alloc(32, 1)).catch((e: unknown) => e);
    expect(isAttestationError(err) && err.check).toBe('report-data');
    expect(isAttestationError(err) && err.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual([
      'report-data',
    ]);
  });

  it('qemu-tdx: missing RawQuote is a document-format error', async () => {
    const r = await rejection(
      createSnpTdxValidator('qemu-tdx', config()).validate(Buffer.from('{"UserData":""}'), Buffer.alloc(32)),
    );
    expect(r.check).toBe('document-format');
  });

  it('qemu-tdx: collateral that cannot be fetched names the FMSPC', async () => {
    const doc = Buffer.from(
      JSON.stringify({
        RawQuote: b64(vec('go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat')),
        UserData: '',
      }),
    );
    const v = createSnpTdxValidator('qemu-tdx', {
      ...config(),
      getCollateral: async () => {
        throw new Error('Intel PCS unreachable');
      },
    });
    const r = await rejection(v.validate(doc, Buffer.alloc(32)));
    expect(r.check).toBe('collateral');
    expect(r.message).toContain('FMSPC 00806f050000: Intel PCS unreachable');
  });

  it('azure-tdx: the quote must bind the HCL runtime data (hcl-runtime-data-hash)', async () => {
    const runtime = vec('constellation/azure-tdx/hclreport.bin').subarray(1236, 2436);
    const info = Buffer.from(
      JSON.stringify({
        AttestationReport: b64(vec('go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat')),
        RuntimeData: b64(runtime),
      }),
    );
    const akPub = rsaTpmtPublic(Buffer.alloc(256, 0xc1));
    const doc = Buffer.from(
      JSON.stringify({ Attestation: { ak_pub: b64(akPub) }, InstanceInfo: b64(info), UserData: '' }),
    );
    const v = createSnpTdxValidator('azure-tdx', {
      ...config(),
      oid: variantOid('azure-tdx'),
      verifyVtpmQuote: async () => ({ pcrs: new Map(), checks: [] }),
    });
    const r = await rejection(v.validate(doc, Buffer.alloc(32)));
    expect(r.check).toBe('hcl-runtime-data-hash');
  });
});

it('qemu-tdx: collateral is fetched only for a PCK chain to the pinned root (a FAKE Intel PKI forges one)', async () => {
  const [pinned, forger] = await Promise.all([
    createFakeIntelPki(),
    createFakeIntelPki({ fmspc: '0badf00d0001' }),
  ]);
  const fmspcs: string[] = [];
  const v = createSnpTdxValidator('qemu-tdx', {
    oid: variantOid('qemu-tdx'),
    root: pinned.rootPem,
    measurements: noMeasurements,
    clock: new FakeClock(new Date('2026-11-21T00:00:00Z')),
    getCollateral: async (fmspc) => {
      fmspcs.push(fmspc);
      throw new Error('test: no collateral here');
    },
  });
  const userData = Buffer.from('u');
  const nonce = Buffer.alloc(32, 7);
  const reportData = createHash('sha256').update(userData).update(nonce).digest();
  const doc = (pki: typeof pinned) =>
    Buffer.from(
      JSON.stringify({ RawQuote: b64(signTdxQuote(pki, { reportData })), UserData: b64(userData) }),
    );

  const forged = await rejection(v.validate(doc(forger), nonce));
  expect(forged.check).toBe('pck-chain');
  expect(fmspcs).toEqual([]);

  const genuine = await rejection(v.validate(doc(pinned), nonce));
  expect(genuine.check).toBe('collateral');
  expect(fmspcs).toEqual([Buffer.from(pinned.platform.fmspc).toString('hex')]);
});
