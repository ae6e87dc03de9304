/**
 * Verification of one TPM quote against an attestation key, as go-tpm-tools'
 * VerifyAttestation checks it: the TPMT_SIGNATURE over the TPMS_ATTEST bytes with the AK, the
 * TPMS_ATTEST extraData, the PCR selection, and the PCR digest — H(selected PCR values in selection
 * order) where H is the signing scheme's hash, not the bank's.
 */
import { createHash, constants as cryptoConstants, verify } from 'node:crypto';
import { AttestationError } from '../../../ports/errors.js';
import type { TpmtPublic } from '../../tpm/tpm2-public.js';
import {
  algName,
  hashName,
  hashSize,
  parseTpmsAttest,
  parseTpmtSignature,
  TpmAlg,
  type TpmsAttest,
  type TpmtSignature,
} from '../../tpm/tpm2-wire.js';
import type { CheckRecorder } from '../shared/checks.js';

/** One quote as carried in a go-tpm-tools `tpm.Quote`. */
export interface QuoteInput {
  /** TPMS_ATTEST bytes. */
  quote: Uint8Array;
  /** TPMT_SIGNATURE bytes. */
  rawSig: Uint8Array;
  /** The PCR bank (TPM_ALG_ID) the values belong to. */
  pcrHashAlg: number;
  /** PCR values by index. */
  pcrs: Map<number, Uint8Array>;
}

/** A quote that passed every check. */
export interface VerifiedQuote {
  attest: TpmsAttest;
  signature: TpmtSignature;
  /** The bank (TPM_ALG_ID) whose PCRs the quote covers. */
  bank: number;
  pcrs: Map<number, Uint8Array>;
}

const CURVE_SIZES: Record<number, number> = { 3: 32, 4: 48, 5: 66 };

function leftPad(v: Uint8Array, size: number): Buffer | undefined {
  let i = 0;
  while (i < v.length - size && v[i] === 0) i++;
  const t = v.subarray(i);
  if (t.length > size) return undefined;
  return Buffer.concat([Buffer.alloc(size - t.length), t]);
}

function hex(b: Uint8Array): string {
  return Buffer.from(b).toString('hex');
}

/**
 * Verifies `input` with `ak`: signature, extraData == `expectedExtraData`, PCR selection equal to the
 * supplied PCRs, and the PCR digest. Records each check in `rec`.
 * @throws AttestationError naming the first failed check (`quote-format`, `signature-format`,
 *   `quote-signature`, `extra-data`, `pcr-selection`, `pcr-digest`)
 */
export function verifyQuote(
  ak: TpmtPublic,
  input: QuoteInput,
  expectedExtraData: Uint8Array,
  rec: CheckRecorder,
): VerifiedQuote {
  const bankName = algName(input.pcrHashAlg);
  const attest = rec.run(() => parseTpmsAttest(input.quote));
  const signature = rec.run(() => parseTpmtSignature(input.rawSig));

  // Signature over the exact TPMS_ATTEST bytes.
  const sigHash = hashName(signature.hashAlg);
  if (!sigHash || signature.hashAlg === TpmAlg.SHA1)
    throw rec.fail(
      'quote-signature',
      `${bankName} quote: signature hash ${algName(signature.hashAlg)} is not accepted`,
    );
  if (ak.scheme.scheme !== TpmAlg.NULL) {
    if (ak.scheme.scheme !== signature.sigAlg || ak.scheme.hashAlg !== signature.hashAlg) {
      throw rec.fail(
        'quote-signature',
        `${bankName} quote: signature scheme ${algName(signature.sigAlg)}/${algName(signature.hashAlg)} differs from the AK's ${algName(ak.scheme.scheme)}/${algName(ak.scheme.hashAlg)}`,
      );
    }
  }
  let ok = false;
  try {
    if (ak.type === TpmAlg.RSA && signature.sigAlg === TpmAlg.RSASSA) {
      ok = verify(
        sigHash,
        input.quote,
        { key: ak.publicKey, padding: cryptoConstants.RSA_PKCS1_PADDING },
        signature.signature,
      );
    } else if (ak.type === TpmAlg.RSA && signature.sigAlg === TpmAlg.RSAPSS) {
      ok = verify(
        sigHash,
        input.quote,
        {
          key: ak.publicKey,
          padding: cryptoConstants.RSA_PKCS1_PSS_PADDING,
          saltLength: cryptoConstants.RSA_PSS_SALTLEN_AUTO,
        },
        signature.signature,
      );
    } else if (ak.type === TpmAlg.ECC && signature.sigAlg === TpmAlg.ECDSA && signature.r && signature.s) {
      const size = CURVE_SIZES[ak.curveId] ?? 0;
      const r = leftPad(signature.r, size);
      const s = leftPad(signature.s, size);
      if (r && s)
        ok = verify(
          sigHash,
          input.quote,
          { key: ak.publicKey, dsaEncoding: 'ieee-p1363' },
          Buffer.concat([r, s]),
        );
    } else {
      throw rec.fail(
        'quote-signature',
        `${bankName} quote: ${algName(signature.sigAlg)} signature cannot come from a ${algName(ak.type)} key`,
      );
    }
  } catch (err) {
    if (err instanceof AttestationError) throw err;
    throw rec.fail('quote-signature', `${bankName} quote: verifying signature: ${String(err)}`, {
      cause: err,
    });
  }
  if (!ok)
    throw rec.fail(
      'quote-signature',
      `${bankName} quote: signature does not verify with the attestation key`,
    );
  rec.pass(
    'quote-signature',
    `${bankName} quote: ${algName(signature.sigAlg)}/${algName(signature.hashAlg)} verifies`,
  );

  if (!Buffer.from(attest.extraData).equals(Buffer.from(expectedExtraData))) {
    throw rec.fail(
      'extra-data',
      `${bankName} quote: extraData ${hex(attest.extraData) || '(empty)'} does not match the expected ${hex(expectedExtraData) || '(empty)'} (wrong nonce or user data)`,
    );
  }
  rec.pass('extra-data', `${bankName} quote: extraData matches`);

  // PCR selection: one bank, exactly the supplied PCR indices, values of the bank's size.
  const size = hashSize(input.pcrHashAlg);
  if (size === undefined) throw rec.fail('pcr-selection', `unsupported PCR bank ${bankName}`);
  const sel = attest.pcrSelect;
  const supplied = [...input.pcrs.keys()].sort((a, b) => a - b);
  const selected = sel[0]?.pcrs ?? [];
  if (sel.length !== 1 || sel[0]?.hashAlg !== input.pcrHashAlg || selected.join(',') !== supplied.join(',')) {
    const got = sel.map((s) => `${algName(s.hashAlg)}[${s.pcrs.join(',')}]`).join(' ') || '(none)';
    throw rec.fail(
      'pcr-selection',
      `${bankName} quote: selection ${got} does not match the supplied ${bankName}[${supplied.join(',')}]`,
    );
  }
  for (const [i, v] of input.pcrs) {
    if (v.length !== size)
      throw rec.fail('pcr-selection', `${bankName} PCR${i} has ${v.length} bytes, want ${size}`);
  }
  rec.pass(
    'pcr-selection',
    `${bankName} PCRs ${supplied.length ? `${supplied[0]}–${supplied[supplied.length - 1]}` : 'none'} (${supplied.length})`,
  );

  const h = createHash(sigHash);
  for (const i of selected) h.update(input.pcrs.get(i) as Uint8Array);
  const digest = h.digest();
  if (!digest.equals(Buffer.from(attest.pcrDigest))) {
    throw rec.fail(
      'pcr-digest',
      `${bankName} quote: PCR digest ${hex(attest.pcrDigest)} does not match the supplied PCR values (${sigHash} ${hex(digest)})`,
    );
  }
  rec.pass('pcr-digest', `${bankName} quote: PCR digest matches the supplied values`);
  return { attest, signature, bank: input.pcrHashAlg, pcrs: input.pcrs };
}
