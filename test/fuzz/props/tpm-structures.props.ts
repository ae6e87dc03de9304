/**
 * Fuzz properties of the TPM 2.0 structure parsers: TPMT_PUBLIC, TPMS_ATTEST and TPMT_SIGNATURE of
 * the vTPM verifier (src/adapters/tpm/tpm2-wire.ts), the TPM adapter's own TPMS_ATTEST reader
 * and AK-template matcher (src/adapters/tpm/tpm-structures.ts), and quote verification
 * (src/adapters/attestation/vtpm/quote.ts). Seeds are the real GCE attestation's structures and a
 * soft TPM's RSA, RSA-PSS and ECC ones. Besides "result or documented error", two cross-checks:
 * whatever the verifier's TPMS_ATTEST parser accepts the adapter's reader reads the same way, and a
 * quote never verifies once its TPMS_ATTEST bytes or PCR values differ from what was signed.
 */
import fc from 'fast-check';
import { CheckRecorder } from '../../../src/adapters/attestation/shared/checks.js';
import {
  type AttestationQuote,
  decodeAttestationPb,
} from '../../../src/adapters/attestation/shared/vtpm-document.js';
import { verifyQuote } from '../../../src/adapters/attestation/vtpm/quote.js';
import { matchesRsaAkTemplate, parseQuoteInfo } from '../../../src/adapters/tpm/tpm-structures.js';
import { parseTpmtPublic, type TpmtPublic } from '../../../src/adapters/tpm/tpm2-public.js';
import { parseTpmsAttest, parseTpmtSignature, TpmAlg } from '../../../src/adapters/tpm/tpm2-wire.js';
import { SHA256, SoftTpm } from '../../support/soft-tpm.js';
import { fuzzRuns } from '../harness/config.js';
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
import { attestationError, callDefined, ensure, errorWithPrefix, property } from '../harness/property.js';
import { vector } from '../harness/vectors.js';

interface Seeds {
  publics: Base[];
  attests: Base[];
  signatures: Base[];
  /** Soft-TPM AKs with one valid quote each, for verifyQuote. */
  signed: Array<{ name: string; ak: TpmtPublic; quote: AttestationQuote; nonce: Uint8Array }>;
}

let seeds: Seeds | undefined;

/** Real and soft-TPM structures (built once per thread; RSA key generation takes ~0.1 s). */
function getSeeds(): Seeds {
  if (seeds) return seeds;
  const real = decodeAttestationPb(vector('go-tpm-tools/attestations/gce-cos-85-nonce9009.pb'));
  const s: Seeds = {
    publics: [{ name: 'gce.ak_pub', bytes: real.akPub }],
    attests: real.quotes.map((q, i) => ({ name: `gce.quotes[${i}].quote`, bytes: q.quote })),
    signatures: real.quotes.map((q, i) => ({ name: `gce.quotes[${i}].raw_sig`, bytes: q.rawSig })),
    signed: [],
  };
  for (const key of ['rsa', 'rsa-pss', 'ecc'] as const) {
    const tpm = SoftTpm.create({ key });
    const nonce = Buffer.from(`nonce-${key}`);
    const quote = tpm.quoteBank(nonce, SHA256, [0, 1, 4, 7, 15]);
    s.publics.push({ name: `soft-${key}.ak_pub`, bytes: tpm.akPublic });
    s.attests.push({ name: `soft-${key}.quote`, bytes: quote.quote });
    s.signatures.push({ name: `soft-${key}.raw_sig`, bytes: quote.rawSig });
    s.signed.push({ name: `soft-${key}`, ak: parseTpmtPublic(tpm.akPublic), quote, nonce });
  }
  seeds = s;
  return s;
}

function inputs(bases: Base[]): fc.Arbitrary<FuzzBytes> {
  return fc.oneof(randomBytes(600), mutated(bases, 4));
}

function checkPublic(b: Uint8Array): void {
  const r = callDefined(() => parseTpmtPublic(b), attestationError('ak-public-format'));
  if (r.ok) {
    const k = r.value;
    ensure(Buffer.from(k.raw).equals(Buffer.from(b)), 'raw is the parsed bytes');
    ensure(k.type === TpmAlg.RSA || k.type === TpmAlg.ECC, `key type ${k.type}`);
    ensure(k.publicKey.asymmetricKeyType === (k.type === TpmAlg.RSA ? 'rsa' : 'ec'), 'KeyObject type');
  }
  const m = callDefined(() => matchesRsaAkTemplate(b), { name: 'no error', test: () => false });
  ensure(m.ok && typeof m.value === 'boolean', 'matchesRsaAkTemplate returns a boolean');
}

function checkAttest(b: Uint8Array): void {
  const v = callDefined(() => parseTpmsAttest(b), attestationError('quote-format'));
  const a = callDefined(() => parseQuoteInfo(b), errorWithPrefix(Error, 'parsing TPMS_ATTEST'));
  if (!v.ok) return;
  ensure(a.ok, 'the TPM adapter reads every TPMS_ATTEST the verifier accepts');
  if (!a.ok) return;
  ensure(Buffer.from(a.value.extraData).equals(Buffer.from(v.value.extraData)), 'same extraData');
  ensure(Buffer.from(a.value.pcrDigest).equals(Buffer.from(v.value.pcrDigest)), 'same pcrDigest');
  ensure(
    JSON.stringify(a.value.pcrSelections.map((s) => [s.hash, s.pcrs])) ===
      JSON.stringify(v.value.pcrSelect.map((s) => [s.hashAlg, s.pcrs])),
    'same PCR selection',
  );
}

function checkSignature(b: Uint8Array): void {
  const r = callDefined(() => parseTpmtSignature(b), attestationError('signature-format'));
  if (r.ok && r.value.sigAlg === TpmAlg.ECDSA) {
    const { r: sr, s } = r.value;
    ensure(sr !== undefined && s !== undefined, 'ECDSA carries r and s');
    ensure(r.value.signature.length === (sr?.length ?? 0) + (s?.length ?? 0), 'signature is r‖s');
  }
}

type PcrEdit = { op: 'drop' | 'flip' | 'add' | 'resize'; index: number } | null;

interface QuoteCase {
  seed: number;
  quoteMut: Mutation[];
  sigMut: Mutation[];
  pcrEdit: PcrEdit;
  bank: number | null;
  nonceMut: Mutation[];
}

const quoteCase: fc.Arbitrary<QuoteCase> = fc.record({
  seed: fc.nat({ max: 2 }),
  quoteMut: fc.array(mutation, { maxLength: 3 }),
  sigMut: fc.array(mutation, { maxLength: 2 }),
  pcrEdit: fc.option(
    fc.record({ op: fc.constantFrom('drop', 'flip', 'add', 'resize' as const), index: fc.nat({ max: 40 }) }),
  ),
  bank: fc.option(fc.constantFrom(0, TpmAlg.SHA1, TpmAlg.SHA384, TpmAlg.SHA512, 0x10, 0xffff)),
  nonceMut: fc.array(mutation, { maxLength: 1 }),
});

const VERIFY_CHECKS = [
  'quote-format',
  'signature-format',
  'quote-signature',
  'extra-data',
  'pcr-selection',
  'pcr-digest',
];

function checkVerifyQuote(c: QuoteCase): void {
  const s = getSeeds().signed[c.seed] as Seeds['signed'][number];
  const quote = c.quoteMut.reduce(applyMutation, s.quote.quote);
  const rawSig = c.sigMut.reduce(applyMutation, s.quote.rawSig);
  const nonce = c.nonceMut.reduce(applyMutation, s.nonce);
  const pcrs = new Map(s.quote.pcrs);
  const e = c.pcrEdit;
  if (e?.op === 'drop') pcrs.delete(e.index % 24);
  if (e?.op === 'flip') pcrs.set(e.index % 24, Buffer.alloc(32, 0xee));
  if (e?.op === 'add') pcrs.set(e.index, Buffer.alloc(32, 1));
  if (e?.op === 'resize') pcrs.set(e.index % 24, Buffer.alloc(e.index));
  const input = { quote, rawSig, pcrHashAlg: c.bank ?? s.quote.pcrHashAlg, pcrs };
  const r = callDefined(
    () => verifyQuote(s.ak, input, nonce, new CheckRecorder()),
    attestationError(...VERIFY_CHECKS),
  );
  if (!r.ok) return;
  ensure(Buffer.from(quote).equals(Buffer.from(s.quote.quote)), 'a modified TPMS_ATTEST verified');
  ensure(Buffer.from(nonce).equals(Buffer.from(s.nonce)), 'a quote verified against another nonce');
  ensure(pcrs.size === s.quote.pcrs.size, 'a quote verified with a different PCR set');
  for (const [i, v] of pcrs)
    ensure(Buffer.from(v).equals(Buffer.from(s.quote.pcrs.get(i) ?? [])), `PCR${i} changed but verified`);
}

/** The TPM-structure properties. */
export const properties = {
  tpmtPublic: property({
    arbitrary: () => inputs(getSeeds().publics),
    check: (b: FuzzBytes) => checkPublic(b.bytes),
    runs: fuzzRuns(400),
  }),
  tpmsAttest: property({
    arbitrary: () => inputs(getSeeds().attests),
    check: (b: FuzzBytes) => checkAttest(b.bytes),
    runs: fuzzRuns(500),
  }),
  tpmtSignature: property({
    arbitrary: () => inputs(getSeeds().signatures),
    check: (b: FuzzBytes) => checkSignature(b.bytes),
    runs: fuzzRuns(400),
  }),
  verifyQuote: property({
    arbitrary: () => quoteCase,
    check: checkVerifyQuote,
    runs: fuzzRuns(300),
  }),
  huge: property({
    arbitrary: () => hugeBytes(1 << 20, 10 << 20, getSeeds().attests[0]),
    check: (b: FuzzBytes) => {
      checkPublic(b.bytes);
      checkAttest(b.bytes);
      checkSignature(b.bytes);
    },
    runs: fuzzRuns(5, 'heavy'),
    shrink: false,
  }),
};
