/**
 * qemu-tdx and azure-tdx validators on the real go-tdx-guest quotes (whose report data cannot bind
 * a test's nonce, so these check the rejections and the wiring), the configfs-tsm device against a
 * temp directory laid out like /sys/kernel/config/tsm/report (no TDX or SEV guest device exists on
 * this machine), and the qemu-tdx issuer on top of it.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { ConfigfsTsmDevice } from '../../../../src/adapters/attestation/snp/configfs-tsm.js';
import { createSnpTdxValidator } from '../../../../src/adapters/attestation/snp/factory.js';
import { QemuTdxIssuer } from '../../../../src/adapters/attestation/tdx/issuer.js';
import { variantOid } from '../../../../src/app/registry/index.js';
import { isAttestationError, isConfbootError } from '../../../../src/ports/errors.js';
import type { MeasurementPolicy } from '../../../../src/ports/measurement-policy.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import { useTmpDirs } from '../../../support/tmp.js';
import { rsaTpmtPublic } from '../snp/tpmt-fixture.js';
import { describeVectors, vec } from '../snp/vectors.js';
import { createFakeIntelPki, signTdxQuote } from './fake-intel-pki.js';

const tmp = useTmpDirs('confboot-tsm-');
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

/** Lays out an existing configfs-tsm entry in `root/name` as the kernel would after mkdir. */
function fakeEntry(
  root: string,
  name: string,
  provider: string,
  outblob: Uint8Array,
  auxblob?: Uint8Array,
): string {
  const dir = join(root, name);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'provider'), `${provider}\n`);
  writeFileSync(join(dir, 'generation'), '1\n');
  writeFileSync(join(dir, 'outblob'), outblob);
  if (auxblob) writeFileSync(join(dir, 'auxblob'), auxblob);
  return dir;
}

it('configfs-tsm (temp dir laid out like the kernel): writes inblob, returns outblob and auxblob', async () => {
  const root = tmp();
  const dir = fakeEntry(root, 'e0', 'sev_guest', Uint8Array.of(1, 2, 3), Uint8Array.of(9));
  const device = new ConfigfsTsmDevice({ kind: 'sev-snp', root, entry: 'e0' });
  const data = new Uint8Array(64).fill(0xab);
  const got = await device.getReport(data);
  expect(got).toEqual({ report: Uint8Array.of(1, 2, 3), auxBlob: Uint8Array.of(9) });
  expect(readFileSync(join(dir, 'inblob'))).toEqual(Buffer.from(data));
});

it('configfs-tsm refuses the wrong provider, wrong report-data size, and a missing entry layout', async () => {
  const root = tmp();
  fakeEntry(root, 'e0', 'sev_guest', Uint8Array.of(1));
  const tdx = new ConfigfsTsmDevice({ kind: 'tdx', root, entry: 'e0' });
  const err = await tdx.getReport(new Uint8Array(64)).catch((e: unknown) => e);
  expect(isConfbootError(err) && err.message).toContain('provider is "sev_guest", want tdx_guest');
  const short = await tdx.getReport(new Uint8Array(32)).catch((e: unknown) => e);
  expect(isConfbootError(short) && short.code).toBe('invalid-argument');
  // A plain directory is not configfs: mkdir works but no attributes appear.
  const fresh = new ConfigfsTsmDevice({ kind: 'tdx', root: tmp() });
  const e3 = await fresh.getReport(new Uint8Array(64)).catch((e: unknown) => e);
  expect(isConfbootError(e3) && e3.message).toMatch(
    /getting a tdx report through configfs-tsm .*confboot-[0-9a-f]{16}: .*ENOENT/,
  );
});

it('qemu-tdx issuer: report data = SHA256(userData ‖ nonce) padded, document {RawQuote, UserData}', async () => {
  const root = tmp();
  const quote = Uint8Array.from({ length: 100 }, (_, i) => i);
  const dir = fakeEntry(root, 'q', 'tdx_guest', quote);
  const issuer = new QemuTdxIssuer(
    new ConfigfsTsmDevice({ kind: 'tdx', root, entry: 'q' }),
    variantOid('qemu-tdx'),
  );
  const userData = Buffer.from('tls-spki-hash');
  const nonce = Buffer.alloc(32, 3);
  const doc = JSON.parse(Buffer.from(await issuer.issue(userData, nonce)).toString('utf8')) as {
    RawQuote: string;
    UserData: string;
  };
  expect(Buffer.from(doc.RawQuote, 'base64')).toEqual(Buffer.from(quote));
  expect(Buffer.from(doc.UserData, 'base64')).toEqual(userData);
  const inblob = readFileSync(join(dir, 'inblob'));
  expect(inblob.subarray(0, 32)).toEqual(createHash('sha256').update(userData).update(nonce).digest());
  expect(inblob.subarray(32).every((b) => b === 0)).toBe(true);
  expect(
    () => new QemuTdxIssuer(new ConfigfsTsmDevice({ kind: 'sev-snp', root }), variantOid('qemu-tdx')),
  ).toThrow(/needs a TDX device/);
});
