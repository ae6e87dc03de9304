/**
 * The attestation contract (test/contract/attestation.ts) for the five SEV-SNP/TDX variants, each a
 * real Issuer and the real Validator built by buildValidator (src/app/registry/validators.ts):
 *  - aws-sev-snp, gcp-sev-snp: REAL swtpm (Tpm2ToolsTpm) + SIMULATED SEV-SNP firmware behind the
 *    real ConfigfsTsmDevice (snp/firmware-double.ts), reports signed by a FAKE AMD PKI; the GCE
 *    shielded-identity lookup is a FAKE returning the swtpm's AK;
 *  - azure-sev-snp: REAL swtpm with the AK at 0x81000003 and a SIMULATED HCL report (FAKE-AMD-signed)
 *    in NV 0x01400001, read with the real tpm2_nvread; THIM is a FAKE in-process lookup;
 *  - azure-tdx: the same swtpm AK, a SIMULATED HCL/TDX module report in NV, and a FAKE IMDS quoting
 *    enclave signing under a FAKE Intel PKI (tdx/azure-tdx-simulation.ts);
 *  - qemu-tdx: QemuTdxIssuer on the real ConfigfsTsmDevice({kind: 'tdx'}) whose SIMULATED TDX
 *    firmware answers each inblob with a quote signed under the FAKE Intel PKI.
 * One swtpm serves every TPM-backed variant (the tests of a file run one at a time). Tampering
 * decodes and re-encodes the documents (Go JSON, checked to round-trip byte for byte) and flips
 * bytes the signatures and bindings cover: the SNP report or TDX quote, the certificates, the TPM
 * quote, the AK, the runtime data and the user data. The foreign validator of each variant is the
 * same variant trusting another (FAKE) root.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { afterAll, beforeAll, describe } from 'vitest';
import {
  AZURE_HCL_AK_HANDLE,
  AZURE_HCL_REPORT_NV_INDEX,
  tpm2NvReader,
} from '../../../src/adapters/attestation/azure/nv-reader.js';
import { imdsTdQuoteGetter } from '../../../src/adapters/attestation/azure/tdquote.js';
import {
  decodeVtpmDocument,
  encodeVtpmDocument,
  type VtpmDocument,
} from '../../../src/adapters/attestation/shared/vtpm-document.js';
import { AmdCertCache } from '../../../src/adapters/attestation/snp/cert-cache.js';
import {
  createAwsSevSnpIssuer,
  createAzureSevSnpIssuer,
  createGcpSevSnpIssuer,
} from '../../../src/adapters/attestation/snp/issuers.js';
import { createAzureTdxIssuer } from '../../../src/adapters/attestation/tdx/azure-issuer.js';
import { QemuTdxIssuer } from '../../../src/adapters/attestation/tdx/issuer.js';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { parseTpmtPublic } from '../../../src/adapters/tpm/tpm2-public.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { buildValidator } from '../../../src/app/registry/validators.js';
import type { AmdCertFetcher } from '../../../src/ports/amd-cert-fetcher.js';
import type { GceShieldedIdentity } from '../../../src/ports/gce-shielded-identity.js';
import type { Validator } from '../../../src/ports/validator.js';
import {
  type AttestationPair,
  type AttestationSeed,
  describeAttestationContract,
  flipByteAt,
} from '../../contract/attestation.js';
import type { ContractSubject } from '../../contract/harness.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { buildHclReport, hclRuntimeData, writeNvIndex } from '../../support/azure-hcl.js';
import { SoftTpm } from '../../support/soft-tpm.js';
import {
  buildFakeReport,
  createFakeAmdPki,
  type FakeAmdPki,
  fakeAmdAttestationConfig,
} from './snp/fake-amd-pki.js';
import { ConfigfsTsmDouble, SnpFirmwareDouble, table } from './snp/firmware-double.js';
import {
  FakeImds,
  honestQuotingEnclave,
  SIM_MR_TD,
  simulatedAzureTdxConfig,
  simulatedHclTdxReport,
} from './tdx/azure-tdx-simulation.js';
import {
  createFakeIntelPki,
  type FakeIntelPki,
  quoteSignatureOffset,
  signTdxQuote,
} from './tdx/fake-intel-pki.js';
import { vtpmQuoteTampers } from './vtpm/tampers.js';

type Subject = ContractSubject<AttestationPair, AttestationSeed, { concurrentValidation: boolean }>;

const clock = () => new FakeClock(new Date('2026-01-01T00:00:00Z'));

/** A fetcher that must never be asked (the tests use no network). */
const NO_NETWORK: AmdCertFetcher = {
  fetchVcek: async () => {
    throw new Error('test: no AMD KDS here');
  },
  fetchCertChain: async () => {
    throw new Error('test: no AMD KDS here');
  },
};
const snpDeps = () => ({ clock: clock(), amdCertCache: new AmdCertCache(NO_NETWORK, clock()) });

const config = fakeAmdAttestationConfig;

// --- Tampering: decode, change one covered byte, re-encode. ---

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const unb64 = (v: unknown) => Uint8Array.from(Buffer.from(v as string, 'base64'));
type Json = Record<string, unknown>;

/** Parses Go JSON that must re-encode to exactly `bytes`, so an edit changes only what it edits. */
function parseExact(bytes: Uint8Array, what: string): Json {
  const text = Buffer.from(bytes).toString('utf8');
  const parsed = JSON.parse(text) as Json;
  if (JSON.stringify(parsed) !== text) throw new Error(`test: ${what} does not round-trip through JSON`);
  return parsed;
}

function checkRoundTrip(doc: Uint8Array): void {
  if (!Buffer.from(encodeVtpmDocument(decodeVtpmDocument(doc))).equals(Buffer.from(doc)))
    throw new Error('test: the vTPM document does not round-trip through its codec');
}

function editDoc(doc: Uint8Array, f: (d: VtpmDocument) => void): Uint8Array {
  checkRoundTrip(doc);
  const d = decodeVtpmDocument(doc);
  f(d);
  return encodeVtpmDocument(d);
}

/** Edits the InstanceInfo JSON of a vTPM document. */
function editInfo(doc: Uint8Array, f: (info: Json) => void): Uint8Array {
  return editDoc(doc, (d) => {
    const info = parseExact(d.instanceInfo ?? new Uint8Array(), 'InstanceInfo');
    f(info);
    d.instanceInfo = new TextEncoder().encode(JSON.stringify(info));
  });
}

/** Flips byte `at` of the base64 field `key` of `obj`. */
function flipField(obj: Json, key: string, at: number): void {
  const bytes = unb64(obj[key]);
  if (at >= bytes.length) throw new Error(`test: ${key} has ${bytes.length} bytes, no byte ${at}`);
  obj[key] = b64(flipByteAt(bytes, at));
}

/** Flips the last byte (the issuer's signature) of the PEM certificate in base64 field `key`. */
function flipCertSignature(obj: Json, key: string): void {
  const raw = new X509Certificate(Buffer.from(obj[key] as string, 'base64').toString()).raw;
  const pem = `-----BEGIN CERTIFICATE-----\n${b64(flipByteAt(raw, raw.length - 1))
    .replace(/.{64}/g, '$&\n')
    .trimEnd()}\n-----END CERTIFICATE-----\n`;
  obj[key] = Buffer.from(pem).toString('base64');
}

/** Tampers of the TPM half of a vTPM document (shared with the qemu-vtpm contract), round trip checked. */
const tpmTampers = (doc: Uint8Array, otherAk: Uint8Array) => vtpmQuoteTampers(doc, otherAk, editDoc);

/** SNP report offsets the VCEK/VLEK signature (over bytes 0..0x2a0) or the report itself covers. */
const SNP_REPORT_BYTES: Array<[string, number]> = [
  ['guest policy', 0x08],
  ['VMPL', 0x30],
  ['report data', 0x50],
  ['measurement', 0x90],
  ['reported TCB', 0x180],
  ['signature R', 0x2a0],
  ['signature S', 0x2e8],
];

function snpTampers(
  doc: Uint8Array,
  otherAk: Uint8Array,
  extra: { chipId?: boolean; runtimeData?: boolean } = {},
) {
  const bytes = [...SNP_REPORT_BYTES, ...(extra.chipId ? [['chip ID', 0x1a0] as [string, number]] : [])];
  return [
    ...bytes.map(([what, at]) => ({
      what: `SNP report ${what} (byte 0x${at.toString(16)})`,
      document: editInfo(doc, (info) => flipField(info, 'AttestationReport', at)),
    })),
    {
      what: 'ReportSigner certificate signature',
      document: editInfo(doc, (info) => flipCertSignature(info, 'ReportSigner')),
    },
    ...(extra.runtimeData
      ? [
          {
            what: 'HCL runtime data byte 20',
            document: editInfo(doc, (info) => flipField(info.Azure as Json, 'RuntimeData', 20)),
          },
        ]
      : []),
    ...tpmTampers(doc, otherAk),
  ];
}

/** TDX v4 quote offsets: header, body (MRTD, report data), signature, attestation key, QE report and its signature. */
function tdxQuoteBytes(quote: Uint8Array): Array<[string, number]> {
  if (quote[0] !== 4) throw new Error(`test: want a v4 quote, got version ${quote[0]}`);
  const sig = quoteSignatureOffset(quote);
  const qeReport = sig + 64 + 64 + 6;
  return [
    ['header user data', 28],
    ['MRTD', 48 + 136],
    ['RTMR3', 48 + 136 + 48 * 7],
    ['report data', 48 + 520],
    ['signature', sig],
    ['attestation key', sig + 64],
    ['QE report MRENCLAVE', qeReport + 64],
    ['QE report data', qeReport + 320],
    ['QE report signature', qeReport + 384],
  ];
}

/** Changes one base64 character inside the PCK leaf certificate of a quote's PEM chain. */
function tamperPckPem(quote: Uint8Array): Uint8Array {
  const begin = Buffer.from(quote).indexOf('-----BEGIN CERTIFICATE-----\n');
  if (begin < 0) throw new Error('test: the quote carries no PEM chain');
  const at = begin + 28 + 200; // inside the leaf's TBSCertificate
  const out = Uint8Array.from(quote);
  out[at] = out[at] === 0x41 ? 0x42 : 0x41; // 'A' <-> another base64 letter
  return out;
}

// --- Shared platform: one swtpm, fake PKIs. ---

let swtpm: SwtpmInstance;
let tpm: Tpm2ToolsTpm;
let akPem: string;
let azureTpm: Tpm2ToolsTpm;
let azureAkPem: string;
let amd: FakeAmdPki;
let otherAmd: FakeAmdPki;
let intel: FakeIntelPki;
let otherIntel: FakeIntelPki;
/** TPMT_PUBLIC of a key no TPM here holds. */
const otherAk = SoftTpm.create().akPublic;
const pemOf = async (t: Tpm2ToolsTpm) =>
  parseTpmtPublic(await t.attestationKeyPublic())
    .publicKey.export({ type: 'spki', format: 'pem' })
    .toString();

beforeAll(async () => {
  [swtpm, amd, otherAmd, intel, otherIntel] = await Promise.all([
    startSwtpm(),
    createFakeAmdPki(),
    createFakeAmdPki(),
    createFakeIntelPki(),
    createFakeIntelPki(),
  ]);
  tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
  akPem = await pemOf(tpm);
  // The HCL (simulated) provisions the AK at 0x81000003; the Azure issuers' TPM only uses it.
  await new Tpm2ToolsTpm({ tcti: swtpm.tcti, akHandle: AZURE_HCL_AK_HANDLE }).attestationKeyPublic();
  azureTpm = new Tpm2ToolsTpm({
    tcti: swtpm.tcti,
    akHandle: AZURE_HCL_AK_HANDLE,
    createAttestationKey: false,
  });
  azureAkPem = await pemOf(azureTpm);
}, 60_000);
afterAll(async () => {
  await swtpm?.stop();
});

const supports = { concurrentValidation: true };

const noCleanup = async () => {};

describe('SEV-SNP on a REAL swtpm with SIMULATED firmware (configfs-tsm double) and a FAKE AMD PKI', () => {
  let fw: SnpFirmwareDouble;
  beforeAll(async () => {
    fw = new SnpFirmwareDouble(amd);
    await fw.start();
  });
  afterAll(async () => {
    await fw?.stop();
    if (fw && fw.errors.length > 0) throw new Error(`firmware double failed: ${String(fw.errors[0])}`);
  });

  describeAttestationContract(
    'aws-sev-snp (REAL swtpm, SIMULATED SNP firmware, FAKE AMD PKI: VLEK)',
    async (): Promise<Subject> => {
      fw.signingKey = 'vlek';
      fw.setTable(table(amd, ['vlek', 'asvk', 'ark']));
      return {
        subject: {
          issuer: createAwsSevSnpIssuer({ oid: variantOid('aws-sev-snp'), tpm, device: fw.queuedDevice() }),
          validator: buildValidator('aws-sev-snp', config(amd), snpDeps()),
        },
        seed: {
          tamper: (doc) => snpTampers(doc, otherAk),
          foreignValidator: buildValidator('aws-sev-snp', config(otherAmd), snpDeps()),
        },
        cleanup: noCleanup,
        supports,
      };
    },
  );

  /** FAKE GCE shielded-identity lookup: the swtpm's AK for every instance. */
  const gce: GceShieldedIdentity = { signingKeyPem: async () => akPem };
  const gceInstance = async () =>
    new TextEncoder().encode(
      JSON.stringify({ zone: 'europe-west3-a', project_id: 'confboot-test', instance_name: 'worker-0' }),
    );
  const gcpValidator = (pki: FakeAmdPki): Validator =>
    buildValidator('gcp-sev-snp', config(pki), { ...snpDeps(), gceShieldedIdentity: gce });

  describeAttestationContract(
    'gcp-sev-snp (REAL swtpm, SIMULATED SNP firmware, FAKE AMD PKI: VCEK, FAKE GCE API)',
    async (): Promise<Subject> => {
      fw.signingKey = 'vcek';
      fw.setTable(table(amd, ['vcek', 'ask', 'ark']));
      return {
        subject: {
          issuer: createGcpSevSnpIssuer({
            oid: variantOid('gcp-sev-snp'),
            tpm,
            device: fw.queuedDevice(),
            gceInstance,
          }),
          validator: gcpValidator(amd),
        },
        seed: {
          tamper: (doc) => snpTampers(doc, otherAk, { chipId: true }),
          foreignValidator: gcpValidator(otherAmd),
        },
        cleanup: noCleanup,
        supports,
      };
    },
  );
});

/** SIMULATED Azure HCL report: a FAKE-AMD-signed SNP report binding `runtime`. */
function hclReport(chip: FakeAmdPki, runtime: Uint8Array): Uint8Array {
  const reportData = new Uint8Array(64);
  reportData.set(createHash('sha256').update(runtime).digest());
  return buildHclReport(buildFakeReport(chip, { signingKey: 'vcek', reportData }), 2, runtime);
}

describeAttestationContract(
  'azure-sev-snp (REAL swtpm: AK 0x81000003, SIMULATED HCL report in NV 0x01400001, FAKE AMD PKI, FAKE THIM)',
  async (): Promise<Subject> => {
    // The HCL report binds the runtime data, not the nonce (freshness is the TPM quote's): once per subject.
    await writeNvIndex(swtpm.tcti, AZURE_HCL_REPORT_NV_INDEX, hclReport(amd, hclRuntimeData(azureAkPem)));
    const enc = (s: string) => new TextEncoder().encode(s);
    return {
      subject: {
        issuer: createAzureSevSnpIssuer({
          oid: variantOid('azure-sev-snp'),
          tpm: azureTpm,
          readNvIndex: tpm2NvReader({ tcti: swtpm.tcti }),
          // FAKE THIM: the VCEK and chain of the fake hierarchy.
          certificates: async () => ({
            reportSigner: enc(amd.vcekPem),
            certChain: enc(amd.askPem + amd.arkPem),
          }),
        }),
        validator: buildValidator('azure-sev-snp', config(amd), snpDeps()),
      },
      seed: {
        tamper: (doc) => snpTampers(doc, otherAk, { chipId: true, runtimeData: true }),
        foreignValidator: buildValidator('azure-sev-snp', config(otherAmd), snpDeps()),
      },
      cleanup: noCleanup,
      supports,
    };
  },
);

describe('azure-tdx: FAKE IMDS quoting enclave', () => {
  let imds: FakeImds;
  beforeAll(async () => {
    imds = await FakeImds.start(honestQuotingEnclave(() => intel));
  });
  afterAll(async () => {
    await imds?.close();
  });
  const tdxValidator = (pki: FakeIntelPki) =>
    buildValidator('azure-tdx', simulatedAzureTdxConfig(pki), { clock: clock() });

  describeAttestationContract(
    'azure-tdx (REAL swtpm: AK 0x81000003, SIMULATED HCL/TDX module report in NV, FAKE IMDS, FAKE Intel PKI)',
    async (): Promise<Subject> => {
      await writeNvIndex(
        swtpm.tcti,
        AZURE_HCL_REPORT_NV_INDEX,
        simulatedHclTdxReport(hclRuntimeData(azureAkPem)),
      );
      return {
        subject: {
          issuer: createAzureTdxIssuer({
            oid: variantOid('azure-tdx'),
            tpm: azureTpm,
            readNvIndex: tpm2NvReader({ tcti: swtpm.tcti }),
            getQuote: imdsTdQuoteGetter({ baseUrl: imds.url, timeoutInMs: 5000 }),
          }),
          validator: tdxValidator(intel),
        },
        seed: {
          tamper: (doc) => [
            ...tdxQuoteBytes(
              unb64(
                parseExact(decodeVtpmDocument(doc).instanceInfo ?? new Uint8Array(), 'InstanceInfo')
                  .AttestationReport,
              ),
            ).map(([what, at]) => ({
              what: `TDX quote ${what} (byte ${at})`,
              document: editInfo(doc, (info) => flipField(info, 'AttestationReport', at)),
            })),
            {
              what: 'TDX quote PCK certificate (PEM)',
              document: editInfo(doc, (info) => {
                info.AttestationReport = b64(tamperPckPem(unb64(info.AttestationReport)));
              }),
            },
            {
              what: 'HCL runtime data byte 20',
              document: editInfo(doc, (info) => flipField(info, 'RuntimeData', 20)),
            },
            ...tpmTampers(doc, otherAk),
          ],
          foreignValidator: tdxValidator(otherIntel),
        },
        cleanup: noCleanup,
        supports,
      };
    },
  );
});

describe('qemu-tdx: SIMULATED TDX firmware (configfs-tsm double)', () => {
  let fw: ConfigfsTsmDouble;
  beforeAll(async () => {
    fw = new ConfigfsTsmDouble('tdx', (inblob) => signTdxQuote(intel, { reportData: inblob }));
    await fw.start();
  });
  afterAll(async () => {
    await fw?.stop();
    if (fw && fw.errors.length > 0) throw new Error(`firmware double failed: ${String(fw.errors[0])}`);
  });
  const hex48 = (b: number) => Buffer.alloc(48, b).toString('hex');
  /** MRTD and RTMR0–3 of signTdxQuote's default body, pinned; the root is `pki`'s. */
  const tdxConfig = (pki: FakeIntelPki) =>
    JSON.stringify({
      measurements: {
        0: SIM_MR_TD.toString('hex'),
        1: hex48(0x01),
        2: hex48(0x02),
        3: hex48(0x03),
        4: hex48(0x04),
      },
      intelRootKey: pki.rootPem,
    });

  const editQemuDoc = (doc: Uint8Array, f: (d: Json) => void) => {
    const d = parseExact(doc, 'qemu-tdx document');
    f(d);
    return new TextEncoder().encode(JSON.stringify(d));
  };

  describeAttestationContract(
    'qemu-tdx (SIMULATED TDX firmware behind the real ConfigfsTsmDevice, FAKE Intel PKI)',
    async (): Promise<Subject> => ({
      subject: {
        issuer: new QemuTdxIssuer(fw.queuedDevice(), variantOid('qemu-tdx')),
        validator: buildValidator('qemu-tdx', tdxConfig(intel), { clock: clock() }),
      },
      seed: {
        tamper: (doc) => [
          ...tdxQuoteBytes(unb64(parseExact(doc, 'qemu-tdx document').RawQuote)).map(([what, at]) => ({
            what: `TDX quote ${what} (byte ${at})`,
            document: editQemuDoc(doc, (d) => flipField(d, 'RawQuote', at)),
          })),
          {
            what: 'TDX quote PCK certificate (PEM)',
            document: editQemuDoc(doc, (d) => {
              d.RawQuote = b64(tamperPckPem(unb64(d.RawQuote)));
            }),
          },
          {
            what: 'user data byte 0',
            document: editQemuDoc(doc, (d) => flipField(d, 'UserData', 0)),
          },
        ],
        foreignValidator: buildValidator('qemu-tdx', tdxConfig(otherIntel), { clock: clock() }),
      },
      cleanup: noCleanup,
      supports,
    }),
  );
});
