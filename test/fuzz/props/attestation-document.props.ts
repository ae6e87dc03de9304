/**
 * Fuzz properties of the vTPM attestation document path: upstream's Go-JSON document decoder and
 * the go-tpm-tools protobuf decoder (src/adapters/attestation/shared/vtpm-document.ts), the whole
 * VtpmValidator pipeline on mutated soft-TPM documents (with an event log that replays to the quoted
 * PCRs, so mutations reach every check), and raw verification of the two real GCE attestations
 * (raw-attestation.ts). Everything must end in a result or an AttestationError; an accepted document
 * must carry the user data that was attested; a decoded protobuf must survive an encode round trip.
 */
import { createHash, type KeyObject } from 'node:crypto';
import fc from 'fast-check';
import type { CheckRecorder } from '../../../src/adapters/attestation/shared/checks.js';
import {
  decodeAttestationPb,
  decodeVtpmDocument,
  encodeAttestationPb,
  encodeVtpmDocument,
  type TpmAttestation,
  type VtpmDocument,
} from '../../../src/adapters/attestation/shared/vtpm-document.js';
import { parseCertificates } from '../../../src/adapters/attestation/shared/x509-chain.js';
import { verifyRawAttestation } from '../../../src/adapters/attestation/vtpm/raw-attestation.js';
import { VtpmValidator, type VtpmVariantChecks } from '../../../src/adapters/attestation/vtpm/validator.js';
import { sameKey } from '../../../src/adapters/attestation/vtpm/verify-attestation.js';
import { parseTpmtPublic, type TpmtPublic } from '../../../src/adapters/tpm/tpm2-public.js';
import { variantOid } from '../../../src/app/registry/index.js';
import { MeasurementsPolicy } from '../../../src/domain/measurements.js';
import { SHA1, SHA256, SoftTpm, SoftVtpmIssuer } from '../../support/soft-tpm.js';
import { fuzzRuns } from '../harness/config.js';
import { FuzzJson, jsonMutated } from '../harness/json.js';
import {
  applyMutation,
  type Base,
  FuzzBytes,
  fillRandom,
  hugeBytes,
  type Mutation,
  mutated,
  mutation,
  randomBytes,
} from '../harness/mutate.js';
import { attestationError, callDefined, callDefinedAsync, ensure, property } from '../harness/property.js';
import { vector } from '../harness/vectors.js';

const USER_DATA = Buffer.from('fuzz user data: sha256 of a TLS key would go here');
const NONCE = Buffer.from('fuzz nonce 0123456789abcdef');

/** A crypto-agile SHA-1 + SHA-256 log for PCRs 0–7 whose events were also extended into `tpms`. */
function consistentEventLog(tpms: SoftTpm[]): Uint8Array {
  const u16 = (v: number) => Buffer.from([v & 0xff, v >> 8]);
  const u32 = (v: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    return b;
  };
  const spec = Buffer.concat([
    Buffer.from('Spec ID Event03\0', 'latin1'),
    u32(0),
    Buffer.from([0, 2, 0, 2]),
    u32(2),
    u16(SHA1),
    u16(20),
    u16(SHA256),
    u16(32),
    Buffer.from([0]),
  ]);
  const parts = [u32(0), u32(3), Buffer.alloc(20), u32(spec.length), spec];
  for (let pcr = 0; pcr < 8; pcr++) {
    for (const [type, data] of [
      [0x80000008, Buffer.from(`fuzz firmware blob for PCR${pcr}`)],
      [4, Buffer.alloc(4)],
    ] as const) {
      const d1 = createHash('sha1').update(data).digest();
      const d256 = createHash('sha256').update(data).digest();
      parts.push(u32(pcr), u32(type), u32(2), u16(SHA1), d1, u16(SHA256), d256, u32(data.length), data);
      for (const tpm of tpms) {
        tpm.extend(SHA1, pcr, d1);
        tpm.extend(SHA256, pcr, d256);
      }
    }
  }
  return new Uint8Array(Buffer.concat(parts));
}

export interface Setup {
  validator: VtpmValidator;
  /** Valid documents (they pass validation with NONCE). */
  documents: Base[];
  /** Their parsed JSON. */
  documentJson: Array<{ name: string; value: unknown }>;
  /** Real and soft-TPM go-tpm-tools protobufs. */
  protobufs: Base[];
}

let setup: Promise<Setup> | undefined;

async function makeSetup(): Promise<Setup> {
  const rsa = SoftTpm.create({ key: 'rsa' });
  const ecc = SoftTpm.create({ key: 'ecc' });
  const eventLog = consistentEventLog([rsa, ecc]);
  const trusted: KeyObject[] = [rsa, ecc].map((t) => parseTpmtPublic(t.akPublic).publicKey);
  const checks: VtpmVariantChecks = {
    async checkAk(_doc, ak: TpmtPublic, _extra, rec: CheckRecorder) {
      if (!trusted.some((k) => sameKey(ak, k))) throw rec.fail('ak-trust', 'AK is not a fuzz soft-TPM AK');
      rec.pass('ak-trust', 'soft-TPM AK');
    },
    async validateCvm(_doc, _state, rec: CheckRecorder) {
      rec.pass('cvm', 'fuzz: no CVM checks');
    },
  };
  const sha256 = rsa.banks.get(SHA256) as Map<number, Uint8Array>;
  const policy = new MeasurementsPolicy(
    new Map(
      [0, 4, 7, 15].map((i) => [
        i,
        { expected: Buffer.from(sha256.get(i) as Uint8Array), warnOnly: i === 15 },
      ]),
    ),
  );
  const validator = new VtpmValidator('qemu-vtpm', checks, policy, { oid: variantOid('qemu-vtpm') });
  const issuers: Array<[string, SoftVtpmIssuer]> = [
    ['rsa+eventlog', new SoftVtpmIssuer(rsa, 'qemu-vtpm', { eventLog })],
    [
      'ecc+eventlog+instanceinfo',
      new SoftVtpmIssuer(ecc, 'qemu-vtpm', { eventLog, instanceInfo: Buffer.from('{"zone":"fuzz"}') }),
    ],
    ['rsa-sha256-only', new SoftVtpmIssuer(rsa, 'qemu-vtpm', { banks: [SHA256] })],
  ];
  const documents: Base[] = [];
  for (const [name, issuer] of issuers) {
    const doc = await issuer.issue(USER_DATA, NONCE);
    await validator.validate(doc, NONCE); // the seeds must be valid, or the mutations prove little
    documents.push({ name, bytes: doc });
  }
  const protobufs: Base[] = [
    { name: 'gce-cos-85-nonce9009.pb', bytes: vector('go-tpm-tools/attestations/gce-cos-85-nonce9009.pb') },
    { name: 'gce-cos-85-no-nonce.pb', bytes: vector('go-tpm-tools/attestations/gce-cos-85-no-nonce.pb') },
    { name: 'soft-rsa.pb', bytes: encodeAttestationPb(rsa.attest(NONCE, { eventLog })) },
  ];
  return {
    validator,
    documents,
    documentJson: documents.map((d) => ({
      name: d.name,
      value: JSON.parse(Buffer.from(d.bytes).toString()),
    })),
    protobufs,
  };
}

/** The shared setup (soft TPMs, validator, seed documents), built once per thread. */
export function getSetup(): Promise<Setup> {
  setup ??= makeSetup();
  return setup;
}

/** Seeds needed synchronously by the arbitraries: built by {@link prepare}. */
let seeds: Setup | undefined;

/** Builds the seeds (the harness awaits a property's `prepare` before building its arbitrary). */
async function prepare(): Promise<void> {
  seeds = await getSetup();
}

function ready(): Setup {
  if (!seeds) throw new Error('attestation-document props: prepare() has not run');
  return seeds;
}

const documentError = attestationError('document-format');

/** Any AttestationError (the validator names every failed check). */
const validationError = attestationError();

async function validate(bytes: Uint8Array): Promise<void> {
  const { validator } = await getSetup();
  const r = await callDefinedAsync(() => validator.validate(bytes, NONCE), validationError);
  if (r.ok) {
    ensure(Buffer.from(r.value.userData).equals(USER_DATA), 'accepted a document with other user data');
    ensure(
      r.value.checks.every((c) => c.ok),
      'a successful validation lists only passed checks',
    );
  }
}

function samePb(a: TpmAttestation, b: TpmAttestation): boolean {
  const norm = (x: TpmAttestation) =>
    JSON.stringify({
      akPub: Buffer.from(x.akPub).toString('hex'),
      eventLog: Buffer.from(x.eventLog).toString('hex'),
      akCert: Buffer.from(x.akCert).toString('hex'),
      inter: x.intermediateCerts.map((c) => Buffer.from(c).toString('hex')),
      quotes: x.quotes.map((q) => [
        Buffer.from(q.quote).toString('hex'),
        Buffer.from(q.rawSig).toString('hex'),
        q.pcrHashAlg,
        [...q.pcrs].sort((m, n) => m[0] - n[0]).map(([i, v]) => [i, Buffer.from(v).toString('hex')]),
      ]),
    });
  return norm(a) === norm(b);
}

function checkPb(bytes: Uint8Array): void {
  const r = callDefined(() => decodeAttestationPb(bytes), documentError);
  if (!r.ok) return;
  const again = callDefined(() => decodeAttestationPb(encodeAttestationPb(r.value)), documentError);
  ensure(again.ok && samePb(r.value, again.value), 'decode(encode(decoded)) differs from decoded');
}

const root = () => parseCertificates(vector('go-tpm-tools/ca-certs/tpm_ek_root_1.cer'), 'root');
const intermediate = () =>
  parseCertificates(vector('go-tpm-tools/ca-certs/tpm_ek_intermediate_2.crt'), 'int');

let rawTrust: Parameters<typeof verifyRawAttestation>[1]['trust'] | undefined;

async function checkRaw(bytes: Uint8Array): Promise<void> {
  rawTrust ??= {
    roots: await root(),
    intermediates: await intermediate(),
    at: new Date('2026-11-21T00:00:00Z'),
  };
  const r = await callDefinedAsync(
    () =>
      verifyRawAttestation(bytes, {
        nonce: Buffer.from([0x90, 0x09]),
        trust: rawTrust as NonNullable<typeof rawTrust>,
      }),
    validationError,
  );
  if (r.ok)
    ensure(
      r.value.checks.every((c) => c.ok),
      'a successful raw verification lists only passed checks',
    );
}

/** One edit of a decoded attestation: a binary field mutated, or quotes dropped, duplicated, relabelled. */
type FieldEdit =
  | { field: 'akPub' | 'eventLog' | 'akCert' | 'userData' | 'instanceInfo'; steps: Mutation[] }
  | { field: 'quote' | 'rawSig'; quote: number; steps: Mutation[] }
  | { field: 'pcr'; quote: number; pcr: number; steps: Mutation[] }
  | { field: 'bank'; quote: number; value: number }
  | { field: 'dropQuote' | 'dupQuote'; quote: number };

const steps = fc.array(mutation, { minLength: 1, maxLength: 3 });
const fieldEdit: fc.Arbitrary<FieldEdit> = fc.oneof(
  fc.record({
    field: fc.constantFrom('akPub', 'eventLog', 'akCert', 'userData', 'instanceInfo' as const),
    steps,
  }),
  fc.record({ field: fc.constantFrom('quote', 'rawSig' as const), quote: fc.nat(3), steps }),
  fc.record({ field: fc.constant('pcr' as const), quote: fc.nat(3), pcr: fc.nat(31), steps }),
  fc.record({
    field: fc.constant('bank' as const),
    quote: fc.nat(3),
    value: fc.constantFrom(0, 4, 11, 12, 13, 16, 0x7fffffff, 0xffffffff),
  }),
  fc.record({ field: fc.constantFrom('dropQuote', 'dupQuote' as const), quote: fc.nat(3) }),
);

function editDocument(doc: VtpmDocument, e: FieldEdit): void {
  const a = doc.attestation;
  const q = 'quote' in e ? a.quotes[e.quote % Math.max(1, a.quotes.length)] : undefined;
  const mut = (b: Uint8Array, st: Mutation[]) => st.reduce(applyMutation, b);
  switch (e.field) {
    case 'akPub':
    case 'eventLog':
    case 'akCert':
      a[e.field] = mut(a[e.field], e.steps);
      return;
    case 'userData':
      doc.userData = mut(doc.userData, e.steps);
      return;
    case 'instanceInfo':
      doc.instanceInfo = mut(doc.instanceInfo ?? new Uint8Array(), e.steps);
      return;
    case 'quote':
    case 'rawSig':
      if (q) q[e.field] = mut(q[e.field], e.steps);
      return;
    case 'pcr':
      if (q) q.pcrs.set(e.pcr, mut(q.pcrs.get(e.pcr) ?? new Uint8Array(), e.steps));
      return;
    case 'bank':
      if (q) q.pcrHashAlg = e.value;
      return;
    case 'dropQuote':
      if (q) a.quotes.splice(a.quotes.indexOf(q), 1);
      return;
    case 'dupQuote':
      if (q) a.quotes.push({ ...q, pcrs: new Map(q.pcrs) });
      return;
  }
}

/** Field-level edits of a valid document, re-encoded as valid Go JSON (reaches the binary parsers). */
const fieldMutated = fc
  .tuple(fc.nat({ max: 2 }), fc.array(fieldEdit, { minLength: 1, maxLength: 3 }))
  .map(([i, edits]) => {
    const base = ready().documents[i] as Base;
    const doc = decodeVtpmDocument(base.bytes);
    for (const e of edits) editDocument(doc, e);
    return new FuzzBytes(encodeVtpmDocument(doc), `fieldEdit(${base.name}, ${JSON.stringify(edits)})`);
  });

/** A valid document whose one field is replaced by a huge base64 value (1–10 MB of bytes). */
const hugeField = fc
  .record({
    doc: fc.nat({ max: 2 }),
    field: fc.constantFrom('event_log', 'ak_pub', 'ak_cert', 'UserData', 'InstanceInfo', 'quote', 'pcr'),
    len: fc.integer({ min: 1 << 20, max: 8 << 20 }),
    seed: fc.nat(),
  })
  .map(({ doc, field, len, seed }) => {
    const base = ready().documentJson[doc] as { name: string; value: unknown };
    // biome-ignore lint/suspicious/noExplicitAny: editing an arbitrary JSON document
    const v: any = structuredClone(base.value);
    const big = Buffer.from(fillRandom(new Uint8Array(len), seed)).toString('base64');
    if (field === 'UserData' || field === 'InstanceInfo') v[field] = big;
    else if (field === 'quote') v.Attestation.quotes[0].quote = big;
    else if (field === 'pcr') v.Attestation.quotes[0].pcrs.pcrs['0'] = big;
    else v.Attestation[field] = big;
    return new FuzzJson(v, `hugeField(${base.name}, ${field} = ${len} random bytes, seed ${seed})`);
  });

/** Deeply nested or very wide JSON, 1–8 MB. */
const hugeJson = fc
  .record({
    kind: fc.constantFrom('nested-arrays', 'nested-objects', 'wide-array', 'long-string'),
    n: fc.integer({ min: 1 << 20, max: 8 << 20 }),
  })
  .map(({ kind, n }) => {
    const depth = Math.floor(n / 8);
    let text: string;
    if (kind === 'nested-arrays') text = `{"Attestation":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    else if (kind === 'nested-objects')
      text = `${'{"Attestation":'.repeat(depth / 2)}{}${'}'.repeat(depth / 2)}`;
    else if (kind === 'wide-array') text = `{"Attestation":{"quotes":[${'{},'.repeat(depth)}{}]}}`;
    else text = `{"Attestation":{},"UserData":"${'A'.repeat(n)}"}`;
    return new FuzzBytes(new TextEncoder().encode(text), `hugeJson(${kind}, ${text.length} chars)`);
  });

/** The attestation-document properties. */
export const properties = {
  documentRandom: property({
    arbitrary: () =>
      fc.oneof(
        randomBytes(1024),
        fc.jsonValue({ maxDepth: 4 }).map((v) => new FuzzJson(v, `json(${JSON.stringify(v)})`)),
        fc
          .record(
            {
              Attestation: fc.jsonValue({ maxDepth: 3 }),
              InstanceInfo: fc.jsonValue({ maxDepth: 1 }),
              UserData: fc.jsonValue({ maxDepth: 1 }),
            },
            { requiredKeys: [] },
          )
          .map((v) => new FuzzJson(v, `json(${JSON.stringify(v)})`)),
      ),
    check: (x: FuzzBytes | FuzzJson) => {
      callDefined(() => decodeVtpmDocument(x.bytes), documentError);
    },
    runs: fuzzRuns(500),
  }),
  documentJsonMutated: property({
    prepare,
    arbitrary: () => jsonMutated(ready().documentJson, 3),
    check: (x: FuzzJson) => validate(x.bytes),
    runs: fuzzRuns(300),
    async: true,
  }),
  documentFieldMutated: property({
    prepare,
    arbitrary: () => fieldMutated,
    check: (x: FuzzBytes) => validate(x.bytes),
    runs: fuzzRuns(400),
    async: true,
  }),
  documentBytesMutated: property({
    prepare,
    arbitrary: () => mutated(ready().documents, 3),
    check: (x: FuzzBytes) => validate(x.bytes),
    runs: fuzzRuns(300),
    async: true,
  }),
  protobuf: property({
    prepare,
    arbitrary: () => fc.oneof(randomBytes(1024), mutated(ready().protobufs, 4)),
    check: (x: FuzzBytes) => checkPb(x.bytes),
    runs: fuzzRuns(400),
  }),
  rawAttestation: property({
    prepare,
    arbitrary: () => mutated(ready().protobufs.slice(0, 1), 3),
    check: (x: FuzzBytes) => checkRaw(x.bytes),
    runs: fuzzRuns(120),
    async: true,
  }),
  huge: property({
    prepare,
    arbitrary: () => fc.oneof(hugeField, hugeJson, hugeBytes(1 << 20, 10 << 20, ready().documents[0])),
    check: async (x: FuzzBytes | FuzzJson) => {
      const bytes = x.bytes;
      callDefined(() => decodeVtpmDocument(bytes), documentError);
      callDefined(() => decodeAttestationPb(bytes), documentError);
      await validate(bytes);
    },
    runs: fuzzRuns(8, 'heavy'),
    async: true,
    shrink: false,
  }),
};
