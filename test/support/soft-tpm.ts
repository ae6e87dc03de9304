/**
 * A software TPM for tests and load benchmarks: a node:crypto attestation key (RSA or ECC) that
 * produces genuine TPM 2.0 wire structures — TPMT_PUBLIC, TPMS_ATTEST (quote) and TPMT_SIGNATURE —
 * exactly as a TPM would marshal them, plus PCR banks with extend. It implements the `Tpm` port, so it
 * can stand in for swtpm where process start-up would dominate (benchmarks, validator negative
 * cases). It is NOT a security boundary: the private key lives in this process.
 */
import {
  constants,
  createHash,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  sign,
} from 'node:crypto';
import {
  type AttestationQuote,
  encodeVtpmDocument,
  type TpmAttestation,
} from '../../src/adapters/attestation/shared/vtpm-document.js';
import { variantOid } from '../../src/app/registry/index.js';
import type { Issuer } from '../../src/ports/issuer.js';
import type { Tpm, TpmQuote } from '../../src/ports/tpm.js';
import type { Variant } from '../../src/ports/variant.js';

/** TPM_ALG_IDs of the banks the soft TPM keeps. */
export const SHA1 = 0x0004;
export const SHA256 = 0x000b;
export const SHA384 = 0x000c;
const HASH_NAMES: Record<number, string> = { [SHA1]: 'sha1', [SHA256]: 'sha256', [SHA384]: 'sha384' };
const HASH_SIZES: Record<number, number> = { [SHA1]: 20, [SHA256]: 32, [SHA384]: 48 };

/** Attributes of go-tpm-tools' AK template: fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|restricted|sign. */
export const AK_ATTRIBUTES = 0x00050072;

/** Options for {@link SoftTpm.create}. */
export interface SoftTpmOptions {
  /** `rsa` (RSASSA-SHA256, default), `rsa-pss` (RSAPSS-SHA256) or `ecc` (ECDSA P-256 SHA256). */
  key?: 'rsa' | 'rsa-pss' | 'ecc';
  /** TPMA_OBJECT of the AK (default {@link AK_ATTRIBUTES}). */
  attributes?: number;
  /** Banks to keep (default SHA1 and SHA256). */
  banks?: number[];
  /** Reuse an existing private key (RSA or P-256) instead of generating one. */
  privateKey?: KeyObject;
}

function u16(v: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(v);
  return b;
}
function u32(v: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(v >>> 0);
  return b;
}
function u64(v: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(v);
  return b;
}
function tpm2b(v: Uint8Array): Buffer {
  return Buffer.concat([u16(v.length), v]);
}

/** Marshals TPML_PCR_SELECTION with one bank. */
export function pcrSelection(bank: number, pcrs: number[]): Buffer {
  const bits = Buffer.alloc(3);
  for (const p of pcrs) bits[p >> 3] = (bits[p >> 3] as number) | (1 << (p & 7));
  return Buffer.concat([u32(1), u16(bank), Buffer.from([3]), bits]);
}

/** A software TPM with one attestation key and PCR banks. */
export class SoftTpm implements Tpm {
  /** The AK's TPMT_PUBLIC. */
  readonly akPublic: Uint8Array;
  /** PCR values per bank (TPM_ALG_ID → index → value). */
  readonly banks = new Map<number, Map<number, Uint8Array>>();
  private clock = 1_000_000n;

  private constructor(
    private readonly privateKey: KeyObject,
    private readonly kind: 'rsa' | 'rsa-pss' | 'ecc',
    attributes: number,
    bankIds: number[],
  ) {
    this.akPublic = SoftTpm.marshalPublic(privateKey, kind, attributes);
    for (const b of bankIds) {
      const m = new Map<number, Uint8Array>();
      for (let i = 0; i < 24; i++)
        m.set(i, Buffer.alloc(HASH_SIZES[b] as number, i >= 17 && i <= 22 ? 0xff : 0));
      this.banks.set(b, m);
    }
  }

  /** Creates a soft TPM with a fresh (or given) AK. RSA-2048 generation takes ~0.1 s. */
  static create(options: SoftTpmOptions = {}): SoftTpm {
    const kind = options.key ?? 'rsa';
    const key =
      options.privateKey ??
      (kind === 'ecc'
        ? generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey
        : generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey);
    return new SoftTpm(key, kind, options.attributes ?? AK_ATTRIBUTES, options.banks ?? [SHA1, SHA256]);
  }

  /** Marshals a TPMT_PUBLIC for `key` as go-tpm-tools' AK templates would. */
  static marshalPublic(key: KeyObject, kind: 'rsa' | 'rsa-pss' | 'ecc', attributes: number): Uint8Array {
    const jwk = key.export({ format: 'jwk' });
    const head = Buffer.concat([
      u16(kind === 'ecc' ? 0x0023 : 0x0001),
      u16(SHA256),
      u32(attributes),
      tpm2b(Buffer.alloc(0)),
    ]);
    if (kind === 'ecc') {
      const params = Buffer.concat([u16(0x0010), u16(0x0018), u16(SHA256), u16(0x0003), u16(0x0010)]);
      const x = Buffer.from(jwk.x as string, 'base64url');
      const y = Buffer.from(jwk.y as string, 'base64url');
      return Buffer.concat([head, params, tpm2b(x), tpm2b(y)]);
    }
    const n = Buffer.from(jwk.n as string, 'base64url');
    const e = Buffer.from(jwk.e as string, 'base64url').readUIntBE(
      0,
      Buffer.from(jwk.e as string, 'base64url').length,
    );
    const params = Buffer.concat([
      u16(0x0010),
      u16(kind === 'rsa-pss' ? 0x0016 : 0x0014),
      u16(SHA256),
      u16(n.length * 8),
      u32(e === 65537 ? 0 : e),
    ]);
    return Buffer.concat([head, params, tpm2b(n)]);
  }

  /** The AK's public key as SPKI DER. */
  akPublicKeySpki(): Buffer {
    return createPublicKey(this.privateKey).export({ type: 'spki', format: 'der' });
  }

  /** The AK's public key as PEM "PUBLIC KEY" (what GCE's shielded identity returns). */
  akPublicKeyPem(): string {
    return createPublicKey(this.privateKey).export({ type: 'spki', format: 'pem' }).toString();
  }

  /** TPM name of the AK: nameAlg ‖ SHA256(TPMT_PUBLIC). */
  get akName(): Uint8Array {
    return Buffer.concat([u16(SHA256), createHash('sha256').update(this.akPublic).digest()]);
  }

  /** Sets a PCR directly (test setup). */
  setPcr(bank: number, index: number, value: Uint8Array): void {
    this.banks.get(bank)?.set(index, Buffer.from(value));
  }

  /** Extends `index` in `bank` with `digest`. */
  extend(bank: number, index: number, digest: Uint8Array): void {
    const m = this.banks.get(bank);
    if (!m) throw new Error(`soft TPM has no bank 0x${bank.toString(16)}`);
    const name = HASH_NAMES[bank] as string;
    m.set(
      index,
      createHash(name)
        .update(m.get(index) as Uint8Array)
        .update(digest)
        .digest(),
    );
  }

  /** Builds and signs a TPMS_ATTEST quote of `bank` over `pcrs` (default 0–23). */
  quoteBank(
    qualifyingData: Uint8Array,
    bank: number,
    pcrs: number[] = [...Array(24).keys()],
  ): AttestationQuote {
    const values = this.banks.get(bank);
    if (!values) throw new Error(`soft TPM has no bank 0x${bank.toString(16)}`);
    const sorted = [...pcrs].sort((a, b) => a - b);
    const selected = new Map(sorted.map((i) => [i, Buffer.from(values.get(i) as Uint8Array)] as const));
    const digest = createHash('sha256');
    for (const v of selected.values()) digest.update(v);
    this.clock += 1000n;
    const attest = Buffer.concat([
      u32(0xff544347),
      u16(0x8018),
      tpm2b(this.akName),
      tpm2b(qualifyingData),
      u64(this.clock),
      u32(10),
      u32(0),
      Buffer.from([1]),
      u64(0x2016051100162800n),
      pcrSelection(bank, sorted),
      tpm2b(digest.digest()),
    ]);
    return { quote: attest, rawSig: this.signAttest(attest), pcrHashAlg: bank, pcrs: selected };
  }

  /** Signs `attest` as the TPM would and marshals the TPMT_SIGNATURE. */
  signAttest(attest: Uint8Array): Buffer {
    if (this.kind === 'ecc') {
      const sig = sign('sha256', attest, { key: this.privateKey, dsaEncoding: 'ieee-p1363' });
      return Buffer.concat([u16(0x0018), u16(SHA256), tpm2b(sig.subarray(0, 32)), tpm2b(sig.subarray(32))]);
    }
    if (this.kind === 'rsa-pss') {
      const sig = sign('sha256', attest, {
        key: this.privateKey,
        padding: constants.RSA_PKCS1_PSS_PADDING,
        saltLength: 32,
      });
      return Buffer.concat([u16(0x0016), u16(SHA256), tpm2b(sig)]);
    }
    const sig = sign('sha256', attest, this.privateKey);
    return Buffer.concat([u16(0x0014), u16(SHA256), tpm2b(sig)]);
  }

  /** A go-tpm-tools Attestation quoting every bank with `qualifyingData`. */
  attest(
    qualifyingData: Uint8Array,
    options: { eventLog?: Uint8Array; banks?: number[] } = {},
  ): TpmAttestation {
    return {
      akPub: this.akPublic,
      quotes: (options.banks ?? [...this.banks.keys()]).map((b) => this.quoteBank(qualifyingData, b)),
      eventLog: options.eventLog ?? new Uint8Array(),
      akCert: new Uint8Array(),
      intermediateCerts: [],
    };
  }

  // ---- Tpm port ----

  /** {@inheritDoc Tpm.attestationKeyPublic} */
  async attestationKeyPublic(): Promise<Uint8Array> {
    return this.akPublic;
  }

  /** {@inheritDoc Tpm.quote} */
  async quote(qualifyingData: Uint8Array, pcrs?: number[]): Promise<TpmQuote> {
    const q = this.quoteBank(qualifyingData, SHA256, pcrs);
    return { quote: q.quote, rawSig: q.rawSig, pcrs: q.pcrs };
  }

  /** {@inheritDoc Tpm.readPcrs} */
  async readPcrs(pcrs: number[]): Promise<Map<number, Uint8Array>> {
    const bank = this.banks.get(SHA256) as Map<number, Uint8Array>;
    return new Map(pcrs.map((i) => [i, Buffer.from(bank.get(i) as Uint8Array)] as const));
  }

  /** {@inheritDoc Tpm.pcrEvent} */
  async pcrEvent(pcr: number, data: Uint8Array): Promise<void> {
    for (const bank of this.banks.keys())
      this.extend(
        bank,
        pcr,
        createHash(HASH_NAMES[bank] as string)
          .update(data)
          .digest(),
      );
  }
}

/** extraData = SHA256(userData‖nonce), as upstream's vTPM issuer computes it. */
export function makeExtraData(userData: Uint8Array, nonce: Uint8Array): Buffer {
  return createHash('sha256').update(userData).update(nonce).digest();
}

/**
 * Issues upstream-format vTPM documents from a {@link SoftTpm}, for tests and benchmarks (the real
 * issuer lives in src/adapters/attestation/vtpm/issuer*.ts and talks to a TPM).
 */
export class SoftVtpmIssuer implements Issuer {
  /** {@inheritDoc Issuer.oid} */
  readonly oid: string;

  constructor(
    readonly tpm: SoftTpm,
    readonly variant: Variant = 'qemu-vtpm',
    private readonly extras: { instanceInfo?: Uint8Array; eventLog?: Uint8Array; banks?: number[] } = {},
  ) {
    this.oid = variantOid(variant);
  }

  /** {@inheritDoc Issuer.issue} */
  async issue(userData: Uint8Array, nonce: Uint8Array): Promise<Uint8Array> {
    const extraData = makeExtraData(userData, nonce);
    const tpmNonce = createHash('sha256')
      .update(this.extras.instanceInfo ?? new Uint8Array())
      .update(extraData)
      .digest();
    const attestation = this.tpm.attest(tpmNonce, {
      ...(this.extras.eventLog ? { eventLog: this.extras.eventLog } : {}),
      ...(this.extras.banks ? { banks: this.extras.banks } : {}),
    });
    return encodeVtpmDocument({ attestation, instanceInfo: this.extras.instanceInfo, userData });
  }
}
