/**
 * Fuzz properties of the SEV-SNP and TDX parsers and validators (src/adapters/attestation/snp,
 * tdx): the SNP report, TDX quote v4/v5, Azure HCL report, TPMT_PUBLIC and DER readers, seeded with
 * the real reports and quotes of the shared test vectors; and the azure-sev-snp and qemu-tdx
 * validators on mutated documents built from those vectors. The parsers document plain `Error`s
 * ("throws on …"), so for them a defined error is an `Error` whose class is exactly Error — a
 * TypeError or RangeError means a missed check. The validators must reject with AttestationError
 * only. azure-sev-snp uses a STUB vTPM quote verifier (the vTPM half has its own properties).
 */
import fc from 'fast-check';
import { parseAzureHclReport } from '../../../src/adapters/attestation/azure/hcl-report.js';
import type { VerifyVtpmQuote } from '../../../src/adapters/attestation/shared/cvm-document.js';
import {
  certificateExtensions,
  readChildren,
  readTlv,
} from '../../../src/adapters/attestation/shared/der.js';
import { decodeTpmtPublic } from '../../../src/adapters/attestation/shared/tpm-public.js';
import { parseSnpReport } from '../../../src/adapters/attestation/snp/report.js';
import { SnpValidator } from '../../../src/adapters/attestation/snp/validators.js';
import { parseQeReport, parseTdxQuote } from '../../../src/adapters/attestation/tdx/quote.js';
import { QemuTdxValidator } from '../../../src/adapters/attestation/tdx/validators.js';
import { variantOid } from '../../../src/app/registry/index.js';
import type { MeasurementPolicy } from '../../../src/ports/measurement-policy.js';
import { rsaTpmtPublic } from '../../adapters/attestation/snp/tpmt-fixture.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { fuzzRuns } from '../harness/config.js';
import { FuzzJson, jsonMutated } from '../harness/json.js';
import {
  applyMutation,
  type Base,
  type FuzzBytes,
  hugeBytes,
  type Mutation,
  mutated,
  mutation,
  randomBytes,
} from '../harness/mutate.js';
import {
  attestationError,
  callDefined,
  callDefinedAsync,
  type DefinedError,
  property,
} from '../harness/property.js';
import { vector } from '../harness/vectors.js';

/** A plain Error (exactly that class), as the SNP/TDX parsers document. */
const plainError: DefinedError = {
  name: 'Error (plain)',
  test: (err) => err instanceof Error && err.constructor === Error && err.message.length > 0,
};

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

let bases: { reports: Base[]; quotes: Base[]; hcl: Base[]; certs: Base[] } | undefined;

function getBases() {
  bases ??= {
    reports: [
      { name: 'azure-snp.attestation.bin', bytes: vector('constellation/snp/attestation.bin') },
      { name: 'go-sev-guest.attestation.bin', bytes: vector('go-sev-guest/verify-testdata/attestation.bin') },
      {
        name: 'aws-snp.report.txt',
        bytes: Buffer.from(
          Buffer.from(vector('constellation/aws-snp/report.txt')).toString('latin1').trim(),
          'base64',
        ),
      },
    ],
    quotes: [
      { name: 'tdx_prod_quote_SPR_E4.dat', bytes: vector('go-tdx-guest/testdata/tdx_prod_quote_SPR_E4.dat') },
      { name: 'quote_v5_sample.dat', bytes: vector('go-tdx-guest/testdata/quote_v5_sample.dat') },
      { name: 'cos-113-tdx-quote.dat', bytes: vector('go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat') },
    ],
    hcl: [{ name: 'hclreport.bin', bytes: vector('constellation/azure-tdx/hclreport.bin') }],
    certs: [
      { name: 'vcek.cert', bytes: vector('constellation/snp/vcek.cert') },
      { name: 'vcek.testcer', bytes: vector('go-sev-guest/verify-testdata/vcek.testcer') },
    ],
  };
  return bases;
}

function bytesInput(b: () => Base[]) {
  return fc.constant(null).chain(() => fc.oneof(randomBytes(1500), mutated(b(), 4)));
}

function checkSnpReport(b: Uint8Array): void {
  for (const product of ['milan', 'genoa', 'turin'] as const)
    callDefined(() => parseSnpReport(b, product), plainError);
}

function checkTdxQuote(b: Uint8Array): void {
  callDefined(() => parseTdxQuote(b), plainError);
  callDefined(() => parseQeReport(b.subarray(0, 384)), plainError);
}

function checkDer(b: Uint8Array): void {
  callDefined(() => certificateExtensions(b), plainError);
  const t = callDefined(() => readTlv(b), plainError);
  if (t.ok) callDefined(() => readChildren(t.value.content), plainError);
}

// ---- validators ----

const PCR4 = new Uint8Array(32).fill(4);
const noMeasurements: MeasurementPolicy = { compare: () => [] };

/** STUB vTPM verifier (the vTPM half is fuzzed in attestation-document.props.ts). */
const stubVtpm: VerifyVtpmQuote = async () => ({
  pcrs: new Map([[4, PCR4]]),
  checks: [{ name: 'stub-tpm-quote', ok: true, detail: 'STUB' }],
});

const NONCE = Buffer.alloc(32, 0x42);
const USER_DATA = Buffer.from('spki-hash-of-the-tls-key');

interface ValidatorSetup {
  snp: SnpValidator;
  tdx: QemuTdxValidator;
  snpInfo: Record<string, unknown>;
  snpDoc: Record<string, unknown>;
  tdxDoc: Record<string, unknown>;
}

let validators: ValidatorSetup | undefined;

function getValidators(): ValidatorSetup {
  if (validators) return validators;
  const runtime = vector('constellation/snp/runtimedata.bin');
  const n = (JSON.parse(Buffer.from(runtime).toString('utf8')) as { keys: { n: string }[] }).keys[0]?.n ?? '';
  const akPub = rsaTpmtPublic(Buffer.from(n, 'base64url'));
  const snpInfo = {
    ReportSigner: b64(vector('constellation/snp/vcek.pem')),
    CertChain: b64(vector('constellation/snp/certchain.pem')),
    AttestationReport: b64(vector('constellation/snp/attestation.bin')),
    Azure: { RuntimeData: b64(runtime), MAAToken: '' },
    GCP: null,
  };
  const snpDoc = {
    Attestation: { ak_pub: b64(akPub), quotes: [] },
    InstanceInfo: b64(Buffer.from(JSON.stringify(snpInfo))),
    UserData: b64(USER_DATA),
  };
  const clock = new FakeClock(new Date('2026-11-21T00:00:00Z'));
  const snp = new SnpValidator('azure-sev-snp', {
    oid: variantOid('azure-sev-snp'),
    policy: {
      arks: { milan: vector('constellation/trust-anchors/amd-ark-milan.pem') },
      idKeyDigests: {
        accepted: [
          Buffer.from(
            '57e229e0ffe5fa92d0faddff6cae0e61c926fc9ef9afd20a8b8cfcf7129db9338cbe5bf3f6987733a2bf65d06dc38fc1',
            'hex',
          ),
        ],
        enforcement: 'equal',
      },
      minimumTcb: { bl: 2, tee: 0, snp: 6, ucode: 93 },
    },
    measurements: noMeasurements,
    verifyVtpmQuote: stubVtpm,
    clock,
  });
  const tdx = new QemuTdxValidator({
    oid: variantOid('qemu-tdx'),
    root: vector('go-tdx-guest/trust/trusted_root.pem'),
    measurements: noMeasurements,
    clock,
  });
  const tdxDoc = {
    RawQuote: b64(vector('go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat')),
    UserData: b64(Buffer.from('u')),
  };
  validators = { snp, tdx, snpInfo, snpDoc, tdxDoc };
  return validators;
}

const anyAttestationError = attestationError();

/** A document with its InstanceInfo (SNP) or RawQuote (TDX) edited at the JSON or byte level. */
type DocCase =
  | { kind: 'snp-json'; doc: FuzzJson }
  | { kind: 'snp-info-json'; info: FuzzJson }
  | { kind: 'snp-report'; steps: Mutation[] }
  | { kind: 'snp-cert'; field: SnpCertField; form: 'pem' | 'der'; cert: number; steps: Mutation[] }
  | { kind: 'tdx-json'; doc: FuzzJson }
  | { kind: 'tdx-quote'; steps: Mutation[] };

const steps = fc.array(mutation, { minLength: 1, maxLength: 3 });

/** The InstanceInfo fields that carry certificates, and the PEM vector each one is built from. */
type SnpCertField = 'ReportSigner' | 'CertChain';
const SNP_CERT_VECTORS: Record<SnpCertField, string> = {
  ReportSigner: 'constellation/snp/vcek.pem',
  CertChain: 'constellation/snp/certchain.pem',
};

/**
 * A byte-level mutation of an SNP certificate field: of the PEM file as sent (`pem`), or of the DER
 * of its certificate number `cert` (modulo the count), put back as PEM next to the untouched others
 * (`der`), which reaches the key, validity and extension readers behind a valid PEM wrapper.
 */
const snpCertCase = fc.record({
  kind: fc.constant('snp-cert' as const),
  field: fc.constantFrom<SnpCertField>('ReportSigner', 'CertChain'),
  form: fc.constantFrom<'pem' | 'der'>('pem', 'der'),
  cert: fc.nat({ max: 1 }),
  steps,
});

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g;

/** The field's PEM vector with `steps` applied to the file (`pem`) or to one certificate's DER (`der`). */
function mutatedCertField(c: Extract<DocCase, { kind: 'snp-cert' }>): Uint8Array {
  const pem = vector(SNP_CERT_VECTORS[c.field]);
  if (c.form === 'pem') return c.steps.reduce(applyMutation, pem);
  const blocks = [...Buffer.from(pem).toString('latin1').matchAll(PEM_BLOCK)].map((m) =>
    Buffer.from(m[1] ?? '', 'base64'),
  );
  const k = c.cert % blocks.length;
  const der = c.steps.reduce(applyMutation, blocks[k] as Uint8Array);
  const wrap = (b: Uint8Array) =>
    `-----BEGIN CERTIFICATE-----\n${Buffer.from(b).toString('base64').replace(/.{64}/g, '$&\n')}\n-----END CERTIFICATE-----\n`;
  return Buffer.from(blocks.map((b, i) => wrap(i === k ? der : b)).join(''), 'latin1');
}

function docCase(): fc.Arbitrary<DocCase> {
  const v = getValidators();
  return fc.oneof(
    jsonMutated([{ name: 'azure-snp-doc', value: v.snpDoc }], 3).map((doc) => ({
      kind: 'snp-json' as const,
      doc,
    })),
    jsonMutated([{ name: 'azure-snp-info', value: v.snpInfo }], 3).map((info) => ({
      kind: 'snp-info-json' as const,
      info,
    })),
    steps.map((s) => ({ kind: 'snp-report' as const, steps: s })),
    snpCertCase,
    jsonMutated([{ name: 'qemu-tdx-doc', value: v.tdxDoc }], 3).map((doc) => ({
      kind: 'tdx-json' as const,
      doc,
    })),
    steps.map((s) => ({ kind: 'tdx-quote' as const, steps: s })),
  );
}

const TDX_QUOTE = 'go-tdx-guest/testdata/ccel/cos-113-tdx-quote.dat';

function build(c: DocCase): { validator: 'snp' | 'tdx'; bytes: Uint8Array } {
  const v = getValidators();
  const withInfo = (info: unknown) => ({
    ...v.snpDoc,
    InstanceInfo: b64(Buffer.from(JSON.stringify(info) ?? '')),
  });
  switch (c.kind) {
    case 'snp-json':
      return { validator: 'snp', bytes: c.doc.bytes };
    case 'snp-info-json':
      return { validator: 'snp', bytes: Buffer.from(JSON.stringify(withInfo(c.info.value))) };
    case 'snp-report': {
      const report = c.steps.reduce(applyMutation, vector('constellation/snp/attestation.bin'));
      const info = { ...v.snpInfo, AttestationReport: b64(report) };
      return { validator: 'snp', bytes: Buffer.from(JSON.stringify(withInfo(info))) };
    }
    case 'snp-cert': {
      const info = { ...v.snpInfo, [c.field]: b64(mutatedCertField(c)) };
      return { validator: 'snp', bytes: Buffer.from(JSON.stringify(withInfo(info))) };
    }
    case 'tdx-json':
      return { validator: 'tdx', bytes: c.doc.bytes };
    case 'tdx-quote': {
      const quote = c.steps.reduce(applyMutation, vector(TDX_QUOTE));
      return { validator: 'tdx', bytes: Buffer.from(JSON.stringify({ ...v.tdxDoc, RawQuote: b64(quote) })) };
    }
  }
}

/**
 * Inputs that once escaped as a plain Error or a RangeError (fixed in 5f39306), replayed
 * before the generated ones: wrong JSON types in InstanceInfo, a PCK certificate with a corrupted
 * key (byte 1709 of the quote 0x79 → 0x78), an ASK with a corrupted key (byte 571 of
 * certchain.pem 'C' → 'i') and a VCEK with an unparsable validity date (byte 322 of vcek.pem
 * 'I' → '/').
 */
function fixedDefectExamples(): DocCase[] {
  const v = getValidators();
  /** InstanceInfo with the value at `path` (one or two keys deep) replaced. */
  const info = (path: [string] | [string, string], value: unknown) => {
    const edited = structuredClone(v.snpInfo);
    const [key, inner] = path;
    if (inner === undefined) edited[key] = value;
    else (edited[key] as Record<string, unknown>)[inner] = value;
    return new FuzzJson(edited, `${path.join('.')} = ${JSON.stringify(value)}`);
  };
  const flip = (pos: number, mask: number): Mutation[] => [{ op: 'flip', pos, mask }];
  return [
    { kind: 'snp-info-json', info: info(['AttestationReport'], {}) },
    { kind: 'snp-info-json', info: info(['ReportSigner'], 1) },
    { kind: 'snp-info-json', info: info(['Azure', 'RuntimeData'], []) },
    { kind: 'tdx-quote', steps: flip(1709, 0x79 ^ 0x78) },
    { kind: 'snp-cert', field: 'CertChain', form: 'pem', cert: 0, steps: flip(571, 0x43 ^ 0x69) },
    { kind: 'snp-cert', field: 'ReportSigner', form: 'pem', cert: 0, steps: flip(322, 0x49 ^ 0x2f) },
  ];
}

async function checkValidator(c: DocCase): Promise<void> {
  const { validator, bytes } = build(c);
  const v = getValidators();
  await callDefinedAsync(
    () => (validator === 'snp' ? v.snp : v.tdx).validate(bytes, NONCE),
    anyAttestationError,
  );
}

/** The SEV-SNP/TDX properties. */
export const properties = {
  snpReport: property({
    arbitrary: () => bytesInput(() => getBases().reports),
    check: (b: FuzzBytes) => checkSnpReport(b.bytes),
    runs: fuzzRuns(300),
  }),
  tdxQuote: property({
    arbitrary: () => bytesInput(() => getBases().quotes),
    check: (b: FuzzBytes) => checkTdxQuote(b.bytes),
    runs: fuzzRuns(400),
  }),
  hclReport: property({
    arbitrary: () => bytesInput(() => getBases().hcl),
    check: (b: FuzzBytes) => {
      callDefined(() => parseAzureHclReport(b.bytes), plainError);
    },
    runs: fuzzRuns(300),
  }),
  tpmtPublicAndDer: property({
    arbitrary: () =>
      fc.oneof(
        bytesInput(() => getBases().certs),
        fc.constant(null).chain(() => mutated([{ name: 'azure-ak', bytes: getAk() }], 3)),
      ),
    check: (b: FuzzBytes) => {
      checkDer(b.bytes);
      callDefined(() => decodeTpmtPublic(b.bytes), plainError);
    },
    runs: fuzzRuns(400),
  }),
  validators: property({
    arbitrary: docCase,
    examples: fixedDefectExamples,
    check: checkValidator,
    runs: fuzzRuns(250),
    async: true,
  }),
  huge: property({
    arbitrary: () => hugeBytes(1 << 20, 10 << 20, getBases().quotes[0]),
    check: (b: FuzzBytes) => {
      checkSnpReport(b.bytes);
      checkTdxQuote(b.bytes);
      checkDer(b.bytes);
      callDefined(() => parseAzureHclReport(b.bytes), plainError);
      callDefined(() => decodeTpmtPublic(b.bytes), plainError);
    },
    runs: fuzzRuns(5, 'heavy'),
    shrink: false,
  }),
};

function getAk(): Uint8Array {
  const runtime = vector('constellation/snp/runtimedata.bin');
  const n = (JSON.parse(Buffer.from(runtime).toString('utf8')) as { keys: { n: string }[] }).keys[0]?.n ?? '';
  return rsaTpmtPublic(Buffer.from(n, 'base64url'));
}
