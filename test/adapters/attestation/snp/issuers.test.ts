/**
 * The SEV-SNP issuers (src/adapters/attestation/snp/issuers.ts), issued for real and validated by
 * the repo's own validators (buildValidator → createSnpTdxValidator with the committed vTPM quote
 * verifier):
 *  - the TPM is a REAL swtpm driven through Tpm2ToolsTpm (quotes, AK, and for Azure the AK at
 *    0x81000003 and the HCL report in NV index 0x01400001, read back with tpm2_nvread);
 *  - the SEV-SNP firmware is SIMULATED (no SEV-SNP hardware here): a test double of the kernel's
 *    configfs-tsm report entry in a temp dir (firmware-double.ts), read through the real
 *    ConfigfsTsmDevice, whose `outblob` is a FIFO answered with a report over the bytes the issuer
 *    wrote to `inblob`, signed by a FAKE AMD hierarchy (fake-amd-pki.ts) pinned as the ARK;
 *    `auxblob` is the certificate table;
 *  - Azure's HCL is SIMULATED by writing an HCL report (FAKE-AMD-signed SNP report binding runtime
 *    data that names the swtpm AK) into the swtpm's NV index; Azure THIM and the GCE API are local
 *    FAKES (a loopback HTTP server, a stub lookup).
 * Parsers are also run on the REAL AWS certificate table and the REAL Azure report parts.
 */
import { createHash, createPublicKey, generateKeyPairSync, X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AZURE_HCL_AK_HANDLE,
  AZURE_HCL_REPORT_NV_INDEX,
  tpm2NvReader,
} from '../../../../src/adapters/attestation/azure/nv-reader.js';
import { fetchAzureThimCertificates } from '../../../../src/adapters/attestation/azure/thim.js';
import { parseVtpmDocument } from '../../../../src/adapters/attestation/shared/cvm-document.js';
import { AmdCertCache } from '../../../../src/adapters/attestation/snp/cert-cache.js';
import {
  encodeSnpCertTable,
  parseSnpCertTable,
  SNP_CERT_TABLE_GUIDS,
  type SnpCertTableEntry,
} from '../../../../src/adapters/attestation/snp/cert-table.js';
import { ConfigfsTsmDevice } from '../../../../src/adapters/attestation/snp/configfs-tsm.js';
import {
  awsSevSnpInstanceInfo,
  createAwsSevSnpIssuer,
  createAzureSevSnpIssuer,
  createGcpSevSnpIssuer,
  encodeSnpInstanceInfo,
  gcpSevSnpInstanceInfo,
  parseAzureSnpHclReport,
} from '../../../../src/adapters/attestation/snp/issuers.js';
import { parseSnpReport } from '../../../../src/adapters/attestation/snp/report.js';
import { makeExtraData, VtpmIssuer } from '../../../../src/adapters/attestation/vtpm/issuer.js';
import { type SwtpmInstance, startSwtpm } from '../../../../src/adapters/tpm/swtpm.js';
import { parseTpmtPublic } from '../../../../src/adapters/tpm/tpm2-public.js';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { variantOid } from '../../../../src/app/registry/index.js';
import { buildValidator } from '../../../../src/app/registry/validators.js';
import type { AmdCertFetcher } from '../../../../src/ports/amd-cert-fetcher.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import type { GceShieldedIdentity } from '../../../../src/ports/gce-shielded-identity.js';
import type { Validator } from '../../../../src/ports/validator.js';
import { FakeClock } from '../../../fakes/fake-clock.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import { buildHclReport, hclRuntimeData, writeNvIndex } from '../../../support/azure-hcl.js';
import {
  buildFakeReport,
  createFakeAmdPki,
  type FakeAmdPki,
  fakeAmdAttestationConfig,
} from './fake-amd-pki.js';
import { SnpFirmwareDouble, table } from './firmware-double.js';
import { rsaTpmtPublic } from './tpmt-fixture.js';
import { describeVectors, vec, vecB64 } from './vectors.js';

const nonce = Buffer.alloc(32, 0x5a);
const userData = Buffer.from('sha256-of-the-tls-key');
const der = (pem: string) => Uint8Array.from(new X509Certificate(pem).raw);
/** The DER of the single PEM certificate in a base64 InstanceInfo field. */
const pemDer = (field: unknown) => {
  const pem = Buffer.from(field as string, 'base64').toString();
  expect(pem.match(/-----BEGIN CERTIFICATE-----/g)).toHaveLength(1);
  return der(pem);
};

/** A fetcher that must never be asked (the tests use no network). */
const NO_NETWORK: AmdCertFetcher = {
  fetchVcek: async () => {
    throw new Error('test: no AMD KDS here');
  },
  fetchCertChain: async () => {
    throw new Error('test: no AMD KDS here');
  },
};

const rejectionOf = attestationRejection;

const config = fakeAmdAttestationConfig;

let pki: FakeAmdPki;
let otherChip: FakeAmdPki;
let swtpm: SwtpmInstance;
let tpm: Tpm2ToolsTpm;
let akPem: string;

beforeAll(async () => {
  let other: FakeAmdPki;
  [pki, other, swtpm] = await Promise.all([createFakeAmdPki(), createFakeAmdPki(), startSwtpm()]);
  // Another chip: its own keys and chip ID (fake-amd-pki gives every hierarchy the same ID).
  otherChip = { ...other, chipId: new Uint8Array(64).fill(0xc2) };
  tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
  akPem = parseTpmtPublic(await tpm.attestationKeyPublic())
    .publicKey.export({ type: 'spki', format: 'pem' })
    .toString();
}, 60_000);
afterAll(async () => {
  await swtpm?.stop();
});

const clock = () => new FakeClock(new Date('2026-01-01T00:00:00Z'));
const snpDeps = () => ({ clock: clock(), amdCertCache: new AmdCertCache(NO_NETWORK, clock()) });

describe('aws-sev-snp issuer: real swtpm + SIMULATED SNP firmware (configfs-tsm double, FAKE AMD chain)', {
  timeout: 30_000,
}, () => {
  let fw: SnpFirmwareDouble;
  beforeAll(async () => {
    fw = new SnpFirmwareDouble(pki);
    await fw.start();
  });
  afterAll(async () => {
    await fw?.stop();
    expect(fw?.errors).toEqual([]);
  });
  const reset = (entries = table(pki, ['vlek', 'asvk', 'ark'])) => {
    fw.chip = pki;
    fw.signingKey = 'vlek';
    fw.stale = false;
    fw.setTable(entries);
  };
  const validator = (): Validator => buildValidator('aws-sev-snp', config(pki), snpDeps());
  const issuer = (extra: { signerCertificatePath?: string } = {}) =>
    createAwsSevSnpIssuer({ oid: variantOid('aws-sev-snp'), tpm, device: fw.device(), ...extra });

  it('issues a document the aws-sev-snp validator accepts: report over SHA-512(AK SPKI), VLEK from auxblob', async () => {
    reset();
    const doc = await issuer().issue(userData, nonce);
    const res = await validator().validate(doc, nonce);
    expect(Buffer.from(res.userData).equals(userData)).toBe(true);
    expect(res.checks.filter((c) => !c.ok)).toEqual([]);
    expect(res.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'report-signature',
        'ask-signature',
        'signer-chain',
        'report-data',
        'ak-trust',
      ]),
    );
    expect(res.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining(['quote-signature', 'measurements']),
    );
    const spki = createPublicKey(akPem).export({ type: 'spki', format: 'der' });
    expect(fw.requests.at(-1)?.equals(createHash('sha512').update(spki).digest())).toBe(true);
    const info = JSON.parse(Buffer.from(parseVtpmDocument(doc).instanceInfo).toString()) as Record<
      string,
      unknown
    >;
    expect(Object.keys(info)).toEqual(['ReportSigner', 'CertChain', 'AttestationReport', 'Azure', 'GCP']);
    expect(pemDer(info.ReportSigner)).toEqual(der(pki.vlekPem));
    expect(pemDer(info.CertChain)).toEqual(der(pki.asvkPem));
    expect(info.Azure).toBeNull();
  });

  it('takes the VLEK from the configured file when the certificate table has none', async () => {
    reset(table(pki, ['asvk']));
    const dir = mkdtempSync(join(tmpdir(), 'confboot-vlek-'));
    try {
      writeFileSync(join(dir, 'vlek.der'), der(pki.vlekPem));
      const doc = await issuer({ signerCertificatePath: join(dir, 'vlek.der') }).issue(userData, nonce);
      const res = await validator().validate(doc, nonce);
      expect(res.checks.filter((c) => !c.ok)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses to issue without a VLEK, and when the (simulated) firmware answers with a stale report', async () => {
    reset([]);
    const noVlek = await issuer()
      .issue(userData, nonce)
      .catch((e: unknown) => e);
    expect(isConfbootError(noVlek) && noVlek.code).toBe('failed-precondition');
    expect((noVlek as Error).message).toMatch(/holds no VLEK and no VLEK file is configured/);
    reset();
    fw.stale = true;
    const stale = await issuer()
      .issue(userData, nonce)
      .catch((e: unknown) => e);
    expect((stale as Error).message).toMatch(
      /issuing aws-sev-snp attestation: getting the aws-sev-snp instance info: .*other report data than requested/,
    );
  });

  it('the validator rejects a wrong nonce (extra-data)', async () => {
    reset();
    const doc = await issuer().issue(userData, nonce);
    const r = await rejectionOf(validator().validate(doc, Buffer.alloc(32, 0x5b)));
    expect(r.check).toBe('extra-data');
    expect(r.failed).toEqual(['extra-data']);
  });

  it('the validator rejects a report bound to another AK than the one quoting (report-data)', async () => {
    reset();
    // The report binds the AK of ANOTHER machine (a public key only); the quote comes from the swtpm.
    const n = Buffer.from(
      generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ format: 'jwk' }).n as string,
      'base64url',
    );
    const otherMachine = { attestationKeyPublic: async () => rsaTpmtPublic(n) };
    const relay = new VtpmIssuer({
      variant: 'aws-sev-snp',
      oid: variantOid('aws-sev-snp'),
      tpm,
      instanceInfo: awsSevSnpInstanceInfo({ tpm: otherMachine, device: fw.device() }),
    });
    const r = await rejectionOf(validator().validate(await relay.issue(userData, nonce), nonce));
    expect(r.check).toBe('report-data');
    expect(r.failed).toEqual(['report-data']);
  });

  it('the validator rejects a report from another chip: signed by its key (report-signature) or with its own root (ask-signature)', async () => {
    reset(table(pki, ['vlek', 'asvk']));
    fw.chip = otherChip;
    const foreignKey = await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce));
    expect(foreignKey.check).toBe('report-signature');
    expect(foreignKey.failed).toEqual(['report-signature']);

    fw.setTable(table(otherChip, ['vlek', 'asvk', 'ark']));
    const foreignRoot = await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce));
    expect(foreignRoot.check).toBe('ask-signature');
    expect(foreignRoot.failed).toEqual(['ask-signature']);
  });
});

describe('gcp-sev-snp issuer: real swtpm + SIMULATED SNP firmware (configfs-tsm double, FAKE AMD chain), FAKE GCE API', {
  timeout: 30_000,
}, () => {
  let fw: SnpFirmwareDouble;
  const gceCalls: string[] = [];
  const gceInstance = async () =>
    new TextEncoder().encode(
      JSON.stringify({ zone: 'europe-west3-a', project_id: 'confboot-test', instance_name: 'worker-0' }),
    );
  /** FAKE GCE shielded-identity lookup: returns the swtpm's AK for worker-0. */
  const gce: GceShieldedIdentity = {
    signingKeyPem: async (project, zone, instance) => {
      gceCalls.push(`${project}/${zone}/${instance}`);
      return akPem;
    },
  };
  beforeAll(async () => {
    fw = new SnpFirmwareDouble(pki);
    await fw.start();
  });
  afterAll(async () => {
    await fw?.stop();
    expect(fw?.errors).toEqual([]);
  });
  const reset = () => {
    fw.chip = pki;
    fw.signingKey = 'vcek';
    fw.stale = false;
    fw.setTable(table(pki, ['vcek', 'ask', 'ark']));
  };
  const validator = () =>
    buildValidator('gcp-sev-snp', config(pki), { ...snpDeps(), gceShieldedIdentity: gce });
  const issuer = () =>
    createGcpSevSnpIssuer({ oid: variantOid('gcp-sev-snp'), tpm, device: fw.device(), gceInstance });

  it('issues a document the gcp-sev-snp validator accepts: report over extraData, VCEK + ASK, GCE instance', async () => {
    reset();
    const doc = await issuer().issue(userData, nonce);
    const res = await validator().validate(doc, nonce);
    expect(Buffer.from(res.userData).equals(userData)).toBe(true);
    expect(res.checks.filter((c) => !c.ok)).toEqual([]);
    expect(res.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'report-signature',
        'chip-id',
        'report-data',
        'gce-ak',
        'ak-trust',
        'measurements',
      ]),
    );
    const padded = Buffer.alloc(64);
    padded.set(makeExtraData(userData, nonce));
    expect(fw.requests.at(-1)?.equals(padded)).toBe(true);
    expect(gceCalls.at(-1)).toBe('confboot-test/europe-west3-a/worker-0');
    const info = JSON.parse(Buffer.from(parseVtpmDocument(doc).instanceInfo).toString()) as Record<
      string,
      unknown
    >;
    expect(info.GCP).toEqual({
      zone: 'europe-west3-a',
      project_id: 'confboot-test',
      instance_name: 'worker-0',
    });
    expect(pemDer(info.ReportSigner)).toEqual(der(pki.vcekPem));
    expect(pemDer(info.CertChain)).toEqual(der(pki.askPem));
  });

  it('the validator rejects a wrong nonce (report-data, as the report binds extraData)', async () => {
    reset();
    const doc = await issuer().issue(userData, nonce);
    const r = await rejectionOf(validator().validate(doc, Buffer.alloc(32, 0x5b)));
    expect(r.check).toBe('report-data');
    expect(r.failed).toEqual(['report-data']);
  });

  it('the validator rejects a replayed report (bound to an earlier extraData) with a fresh quote (report-data)', async () => {
    reset();
    const earlier = makeExtraData(userData, Buffer.alloc(32, 1));
    const hook = gcpSevSnpInstanceInfo({ device: fw.device(), gceInstance });
    const replay = new VtpmIssuer({
      variant: 'gcp-sev-snp',
      oid: variantOid('gcp-sev-snp'),
      tpm,
      instanceInfo: (_extraData, options) => hook(earlier, options),
    });
    const r = await rejectionOf(validator().validate(await replay.issue(userData, nonce), nonce));
    expect(r.failed).toEqual(['report-data']);
  });

  it('the validator rejects a report from another chip under the pinned root (report-signature, chip-id)', async () => {
    reset();
    fw.chip = otherChip;
    const r = await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce));
    expect(r.check).toBe('report-signature');
    expect(r.failed).toEqual(['report-signature', 'chip-id']);
  });

  it('the validator rejects when GCE names another AK for the instance (ak-trust)', async () => {
    reset();
    const doc = await issuer().issue(userData, nonce);
    const otherAk = generateKeyPairSync('rsa', { modulusLength: 2048 })
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    const v = buildValidator('gcp-sev-snp', config(pki), {
      ...snpDeps(),
      gceShieldedIdentity: { signingKeyPem: async () => otherAk },
    });
    const r = await rejectionOf(v.validate(doc, nonce));
    expect(r.check).toBe('ak-trust');
  });

  it('refuses a GCE instance info without instance_name, and a TDX device', async () => {
    reset();
    const bad = createGcpSevSnpIssuer({
      oid: variantOid('gcp-sev-snp'),
      tpm,
      device: fw.device(),
      gceInstance: async () => new TextEncoder().encode('{"zone":"z","project_id":"p"}'),
    });
    await expect(bad.issue(userData, nonce)).rejects.toThrow(/GCE instance info has no instance_name/);
    expect(() =>
      createGcpSevSnpIssuer({
        oid: variantOid('gcp-sev-snp'),
        tpm,
        device: new ConfigfsTsmDevice({ kind: 'tdx' }),
        gceInstance,
      }),
    ).toThrow(/needs an SEV-SNP device, got tdx/);
  });
});

/** SIMULATED Azure HCL report: header, FAKE-AMD-signed SNP report binding `runtime`, IGVM data, runtime. */
function hclReport(chip: FakeAmdPki, runtime: Uint8Array, boundRuntime: Uint8Array = runtime): Uint8Array {
  const reportData = new Uint8Array(64);
  reportData.set(createHash('sha256').update(boundRuntime).digest());
  return buildHclReport(buildFakeReport(chip, { signingKey: 'vcek', reportData }), 2, runtime);
}

const runtimeData = hclRuntimeData;

describe('azure-sev-snp issuer: real swtpm (AK at 0x81000003, HCL report in NV 0x01400001) + SIMULATED HCL/SNP firmware, FAKE THIM', {
  timeout: 30_000,
}, () => {
  let azureTpm: Tpm2ToolsTpm;
  let azureAkPem: string;
  let thim: Server;
  let thimUrl: string;
  const thimHeaders: string[] = [];
  /** The HCL (simulated) writes its report into the NV index. */
  const writeNv = (bytes: Uint8Array) => writeNvIndex(swtpm.tcti, AZURE_HCL_REPORT_NV_INDEX, bytes);

  beforeAll(async () => {
    // The HCL (simulated) provisions the AK at 0x81000003; the issuer's TPM only uses it.
    await new Tpm2ToolsTpm({ tcti: swtpm.tcti, akHandle: AZURE_HCL_AK_HANDLE }).attestationKeyPublic();
    azureTpm = new Tpm2ToolsTpm({
      tcti: swtpm.tcti,
      akHandle: AZURE_HCL_AK_HANDLE,
      createAttestationKey: false,
    });
    azureAkPem = parseTpmtPublic(await azureTpm.attestationKeyPublic())
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    thim = createServer((req, res) => {
      thimHeaders.push(String(req.headers.metadata));
      if (req.url !== '/metadata/THIM/amd/certification' || req.headers.metadata !== 'true') {
        res.writeHead(400).end('bad request');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({ vcekCert: pki.vcekPem, tcbm: 'x', certificateChain: pki.askPem + pki.arkPem }),
      );
    });
    await new Promise<void>((resolve) => thim.listen(0, '127.0.0.1', resolve));
    const addr = thim.address();
    thimUrl = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  }, 30_000);
  afterAll(async () => {
    await new Promise((resolve) => thim?.close(resolve));
  });

  const validator = () => buildValidator('azure-sev-snp', config(pki), snpDeps());
  const issuer = () =>
    createAzureSevSnpIssuer({
      oid: variantOid('azure-sev-snp'),
      tpm: azureTpm,
      readNvIndex: tpm2NvReader({ tcti: swtpm.tcti }),
      certificates: (o) => fetchAzureThimCertificates(thimUrl, o),
    });

  it('issues a document the azure-sev-snp validator accepts: HCL report via tpm2_nvread, VCEK from THIM', async () => {
    await writeNv(hclReport(pki, runtimeData(azureAkPem)));
    const doc = await issuer().issue(userData, nonce);
    const res = await validator().validate(doc, nonce);
    expect(Buffer.from(res.userData).equals(userData)).toBe(true);
    expect(res.checks.filter((c) => !c.ok)).toEqual([]);
    expect(res.checks.map((c) => c.name)).toEqual(
      expect.arrayContaining([
        'report-signature',
        'hcl-runtime-data-hash',
        'hcl-ak',
        'ak-trust',
        'measurements',
      ]),
    );
    const info = JSON.parse(Buffer.from(parseVtpmDocument(doc).instanceInfo).toString()) as {
      AttestationReport: string;
      Azure: { RuntimeData: string; MAAToken: string };
      ReportSigner: string;
    };
    expect(Buffer.from(info.AttestationReport, 'base64').length).toBe(1204);
    expect(Buffer.from(info.Azure.RuntimeData, 'base64').equals(Buffer.from(runtimeData(azureAkPem)))).toBe(
      true,
    );
    expect(info.Azure.MAAToken).toBe('');
    expect(pemDer(info.ReportSigner)).toEqual(der(pki.vcekPem));
    expect(thimHeaders.at(-1)).toBe('true');
  });

  it('the validator rejects a wrong nonce (extra-data)', async () => {
    await writeNv(hclReport(pki, runtimeData(azureAkPem)));
    const doc = await issuer().issue(userData, nonce);
    const r = await rejectionOf(validator().validate(doc, Buffer.alloc(32, 0x5b)));
    expect(r.check).toBe('extra-data');
  });

  it('the validator rejects an HCL report whose runtime data names another AK (hcl-ak) or is not the bound data (hcl-runtime-data-hash)', async () => {
    const otherAk = generateKeyPairSync('rsa', { modulusLength: 2048 })
      .publicKey.export({ type: 'spki', format: 'pem' })
      .toString();
    await writeNv(hclReport(pki, runtimeData(otherAk)));
    const wrongKey = await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce));
    expect(wrongKey.failed).toEqual(['hcl-ak']);

    await writeNv(hclReport(pki, runtimeData(azureAkPem), runtimeData(otherAk)));
    const unbound = await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce));
    expect(unbound.failed).toEqual(['hcl-runtime-data-hash']);
  });

  it('the validator rejects a report from another chip under the pinned root (report-signature, chip-id)', async () => {
    await writeNv(hclReport(otherChip, runtimeData(azureAkPem)));
    const r = await rejectionOf(validator().validate(await issuer().issue(userData, nonce), nonce));
    expect(r.check).toBe('report-signature');
    expect(r.failed).toEqual(['report-signature', 'chip-id']);
  });

  it('without THIM the document carries no VCEK (the validator would fetch it from AMD KDS)', async () => {
    await writeNv(hclReport(pki, runtimeData(azureAkPem)));
    const doc = await createAzureSevSnpIssuer({
      oid: variantOid('azure-sev-snp'),
      tpm: azureTpm,
      readNvIndex: tpm2NvReader({ tcti: swtpm.tcti }),
    }).issue(userData, nonce);
    const info = JSON.parse(Buffer.from(parseVtpmDocument(doc).instanceInfo).toString()) as Record<
      string,
      unknown
    >;
    expect(info.ReportSigner).toBeNull();
    const r = await rejectionOf(validator().validate(doc, nonce));
    expect(r.message).toContain('no AMD KDS here');
  });

  it('tpm2NvReader names the index when it is missing; THIM errors name the URL', async () => {
    const err = await tpm2NvReader({ tcti: swtpm.tcti })(0x01400002).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect((err as Error).message).toMatch(/reading TPM NV index 0x01400002 \(TCTI swtpm:/);
    const thimErr = await fetchAzureThimCertificates(`${thimUrl}/nope`).catch((e: unknown) => e);
    expect((thimErr as Error).message).toMatch(
      /fetching the VCEK from http:\/\/127\.0\.0\.1:\d+\/nope\/metadata\/THIM/,
    );
  });
});

describe('SNP certificate table and HCL report parsing', () => {
  describeVectors('on the REAL vectors', () => {
    it('finds the VLEK in the REAL AWS certificate table', () => {
      const t = parseSnpCertTable(vec('constellation/snp/attestation_vlek.certtable.bin'));
      expect(t.entries.map((e) => e.guid)).toEqual([SNP_CERT_TABLE_GUIDS.vlek]);
      expect(
        Buffer.from(t.vlek ?? []).equals(vec('constellation/snp/attestation_vlek.signer_vlek.der')),
      ).toBe(true);
      expect(t.vcek).toBeUndefined();
    });

    it('splits an HCL report made of the REAL Azure report and runtime data; refuses the REAL TDX one', () => {
      const report = vec('constellation/snp/attestation.bin');
      const runtime = vec('constellation/snp/runtimedata.bin');
      const header = Buffer.alloc(32);
      header.write('HCLA', 0, 'latin1');
      const hcl = parseAzureSnpHclReport(Buffer.concat([header, report, runtime]));
      expect(Buffer.from(hcl.attestationReport).equals(report)).toBe(true);
      expect(Buffer.from(hcl.runtimeData).equals(runtime)).toBe(true);
      expect(() => parseAzureSnpHclReport(vec('constellation/azure-tdx/hclreport.bin'))).toThrow(
        /HCL report type is 4, want 2/,
      );
      expect(() => parseAzureSnpHclReport(Buffer.concat([header, report, runtime.subarray(1)]))).toThrow(
        /runtime data size 584 exceeds/,
      );
      expect(vecB64('constellation/aws-snp/report.txt').length).toBe(1184);
    });
  });

  it('round-trips every known GUID and rejects malformed tables', async () => {
    const entries = table(pki, ['vcek', 'vlek', 'ask', 'ark']);
    const t = parseSnpCertTable(encodeSnpCertTable(entries));
    expect(Buffer.from(t.vcek ?? []).equals(Buffer.from(der(pki.vcekPem)))).toBe(true);
    expect(Buffer.from(t.vlek ?? []).equals(Buffer.from(der(pki.vlekPem)))).toBe(true);
    expect(Buffer.from(t.ask ?? []).equals(Buffer.from(der(pki.askPem)))).toBe(true);
    expect(Buffer.from(t.ark ?? []).equals(Buffer.from(der(pki.arkPem)))).toBe(true);
    const one = encodeSnpCertTable(entries.slice(0, 1));
    const unterminated = Buffer.alloc(24);
    Buffer.from(one.subarray(0, 16)).copy(unterminated);
    unterminated.writeUInt32LE(24, 20); // the entry covers itself: in range, but nothing ends the table
    expect(() => parseSnpCertTable(unterminated)).toThrow(/no terminating entry within 24 bytes/);
    const far = Buffer.from(one);
    far.writeUInt32LE(one.length, 16);
    expect(() => parseSnpCertTable(far)).toThrow(/ends past the table/);
    const twice = encodeSnpCertTable([entries[0] as SnpCertTableEntry, entries[0] as SnpCertTableEntry]);
    expect(() => parseSnpCertTable(twice)).toThrow(/appears twice/);
  });

  it('encodes InstanceInfo as Go JSON (field order, null for absent)', () => {
    const json = Buffer.from(
      encodeSnpInstanceInfo({
        attestationReport: Uint8Array.of(1, 2),
        azure: { runtimeData: Uint8Array.of(3) },
      }),
    ).toString();
    expect(json).toBe(
      '{"ReportSigner":null,"CertChain":null,"AttestationReport":"AQI=","Azure":{"RuntimeData":"Aw==","MAAToken":""},"GCP":null}',
    );
    expect(parseSnpReport(buildFakeReport(pki)).reportData.length).toBe(64);
  });
});
