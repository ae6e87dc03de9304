/**
 * Just enough TPMT_PUBLIC decoding to turn a vTPM attestation key (the `ak_pub` of an attestation
 * document) into a public key: SEV-SNP variants bind the AK through report_data (aws-sev-snp) or
 * the Azure HCL runtime data (azure-sev-snp, azure-tdx). RSA and ECC (NIST P-256/384/521) keys.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';

const TPM_ALG_RSA = 0x0001;
const TPM_ALG_ECC = 0x0023;
const TPM_ALG_NULL = 0x0010;
const CURVES: Record<number, { crv: string; size: number }> = {
  3: { crv: 'P-256', size: 32 },
  4: { crv: 'P-384', size: 48 },
  5: { crv: 'P-521', size: 66 },
};

/** A decoded AK. `rsa` holds the raw modulus and the exponent as the TPM stores it (0 = 65537). */
export interface TpmPublicKey {
  key: KeyObject;
  rsa?: { modulus: Uint8Array; exponent: number };
}

const b64url = (b: Uint8Array) => Buffer.from(b).toString('base64url');

/** Decodes a TPMT_PUBLIC (RSA or ECC). Throws on anything else or on truncation. */
export function decodeTpmtPublic(buf: Uint8Array): TpmPublicKey {
  let off = 0;
  const need = (n: number) => {
    if (off + n > buf.length) throw new Error('TPMT_PUBLIC is truncated');
  };
  const u16 = () => {
    need(2);
    const v = ((buf[off] as number) << 8) | (buf[off + 1] as number);
    off += 2;
    return v;
  };
  const u32 = () => {
    const hi = u16();
    return hi * 65536 + u16();
  };
  const tpm2b = () => {
    const n = u16();
    need(n);
    const v = buf.subarray(off, off + n);
    off += n;
    return v;
  };
  const type = u16();
  u16(); // nameAlg
  u32(); // objectAttributes
  tpm2b(); // authPolicy
  const sym = u16();
  if (sym !== TPM_ALG_NULL) {
    u16();
    u16();
  }
  const scheme = u16();
  if (scheme !== TPM_ALG_NULL) u16();
  if (type === TPM_ALG_RSA) {
    u16(); // keyBits
    const exponent = u32();
    const modulus = Uint8Array.from(tpm2b());
    const e = exponent === 0 ? 65537 : exponent;
    const eHex = e.toString(16);
    const eBytes = Buffer.from(eHex.length % 2 ? `0${eHex}` : eHex, 'hex');
    const key = createPublicKey({
      key: { kty: 'RSA', n: b64url(modulus), e: b64url(eBytes) },
      format: 'jwk',
    });
    return { key, rsa: { modulus, exponent } };
  }
  if (type === TPM_ALG_ECC) {
    const curve = CURVES[u16()];
    if (curve === undefined) throw new Error('TPMT_PUBLIC uses an unsupported ECC curve');
    const kdf = u16();
    if (kdf !== TPM_ALG_NULL) u16();
    const pad = (v: Uint8Array) => {
      const out = new Uint8Array(curve.size);
      out.set(v, curve.size - v.length);
      return out;
    };
    const x = pad(tpm2b());
    const y = pad(tpm2b());
    const key = createPublicKey({
      key: { kty: 'EC', crv: curve.crv, x: b64url(x), y: b64url(y) },
      format: 'jwk',
    });
    return { key };
  }
  throw new Error(`TPMT_PUBLIC type 0x${type.toString(16)} is not RSA or ECC`);
}
