/**
 * SEV-SNP attestation report layout (AMD SEV-SNP ABI, ATTESTATION_REPORT, versions 2 to 5).
 * Parsing only; verification lives in verify.ts. Offsets are the ABI's; all integers are
 * little-endian. Azure's HCL report carries extra bytes after the 0x4A0-byte report, so any input of
 * at least 0x4A0 bytes is accepted and only the first 0x4A0 bytes are read.
 */

/** Size of the report proper, in bytes. */
export const SNP_REPORT_SIZE = 0x4a0;
/** The signature covers bytes [0, 0x2A0). */
export const SNP_SIGNED_SIZE = 0x2a0;
/**
 * Report versions this parser understands. Versions 4 and 5 keep version 3's layout and fill
 * reserved bytes: version 5 adds the launch and current mitigation vectors at 0x1F8 and 0x200.
 */
export const SNP_REPORT_VERSIONS = [2, 3, 4, 5] as const;
/** The first report version that carries mitigation vectors. */
export const SNP_MIT_VECTOR_VERSION = 5;

/** AMD EPYC product lines with their own ARK. */
export type AmdProduct = 'milan' | 'genoa' | 'turin';
/** All products, in order. */
export const AMD_PRODUCTS: readonly AmdProduct[] = ['milan', 'genoa', 'turin'];

/** AMD's spelling of a product in certificate names and KDS URLs. */
export const AMD_PRODUCT_NAMES: Record<AmdProduct, string> = {
  milan: 'Milan',
  genoa: 'Genoa',
  turin: 'Turin',
};

/** Security patch levels of one TCB. `fmc` exists on Turin only. */
export interface SnpTcbParts {
  bl: number;
  tee: number;
  snp: number;
  ucode: number;
  fmc?: number;
}

/** A TCB_VERSION with its raw value. */
export interface SnpTcb extends SnpTcbParts {
  /** The raw little-endian u64. */
  raw: bigint;
}

/** Decoded guest policy (the u64 at 0x08). */
export interface SnpGuestPolicy {
  abiMinor: number;
  abiMajor: number;
  smt: boolean;
  migrateMa: boolean;
  debug: boolean;
  singleSocket: boolean;
  raw: bigint;
}

/** Which key signed the report (signer_info bits 2–4). */
export type SnpSigningKey = 'vcek' | 'vlek' | 'none' | 'unknown';

/** A parsed report. Byte fields are views into a private copy of the input. */
export interface SnpReport {
  version: number;
  guestSvn: number;
  policy: SnpGuestPolicy;
  familyId: Uint8Array;
  imageId: Uint8Array;
  vmpl: number;
  signatureAlgo: number;
  currentTcb: SnpTcb;
  platformInfo: bigint;
  signerInfo: { authorKeyEn: boolean; maskChipKey: boolean; signingKey: SnpSigningKey; raw: number };
  reportData: Uint8Array;
  measurement: Uint8Array;
  hostData: Uint8Array;
  idKeyDigest: Uint8Array;
  authorKeyDigest: Uint8Array;
  reportId: Uint8Array;
  reportIdMa: Uint8Array;
  reportedTcb: SnpTcb;
  /** CPUID family/model/stepping; only reports of version ≥ 3 fill these (else 0). */
  cpuid: { family: number; model: number; stepping: number };
  chipId: Uint8Array;
  committedTcb: SnpTcb;
  currentVersion: { major: number; minor: number; build: number };
  committedVersion: { major: number; minor: number; build: number };
  launchTcb: SnpTcb;
  /** LAUNCH_MIT_VECTOR (u64 at 0x1F8): mitigations verified when the guest launched; version ≥ 5 only. */
  launchMitVector?: bigint;
  /** CURRENT_MIT_VECTOR (u64 at 0x200): mitigations verified now; version ≥ 5 only. */
  currentMitVector?: bigint;
  /** Bytes [0, 0x2A0): what the signature covers. */
  signedBytes: Uint8Array;
  /** Signature R and S as 48-byte big-endian integers. */
  signatureR: Uint8Array;
  signatureS: Uint8Array;
  /**
   * True when the signature field has non-zero bytes outside the 48-byte R and S values (bytes
   * 48..72 of R and S, and the reserved rest of the 512-byte field), which P-384 leaves zero.
   */
  signatureHasHighBytes: boolean;
  /** The 0x4A0 report bytes. */
  raw: Uint8Array;
  /** Number of bytes after the report in the input (Azure HCL header, padding). */
  trailingBytes: number;
}

/**
 * Decodes a TCB_VERSION. Milan and Genoa: byte 0 BL, 1 TEE, 6 SNP, 7 UCODE. Turin: byte 0 FMC,
 * 1 BL, 2 TEE, 3 SNP, 7 UCODE.
 */
export function decodeTcb(raw: bigint, product: AmdProduct): SnpTcb {
  const b = (i: number) => Number((raw >> BigInt(8 * i)) & 0xffn);
  if (product === 'turin') return { fmc: b(0), bl: b(1), tee: b(2), snp: b(3), ucode: b(7), raw };
  return { bl: b(0), tee: b(1), snp: b(6), ucode: b(7), raw };
}

/** Formats a TCB as `BL/TEE/SNP/UCODE` (with `FMC` first on Turin). */
export function formatTcb(t: SnpTcbParts): string {
  const base = `bl=${t.bl} tee=${t.tee} snp=${t.snp} ucode=${t.ucode}`;
  return t.fmc === undefined ? base : `fmc=${t.fmc} ${base}`;
}

/** True when every component of `a` is ≥ the same component of `b`. */
export function tcbAtLeast(a: SnpTcbParts, b: SnpTcbParts): boolean {
  return (
    a.bl >= b.bl && a.tee >= b.tee && a.snp >= b.snp && a.ucode >= b.ucode && (a.fmc ?? 0) >= (b.fmc ?? 0)
  );
}

/**
 * The components of `actual` below `minimum`, named as AMD names them, with how much each is short:
 * `microcode 219 < 220 (by 1), SNP firmware 23 < 24 (by 1)`; empty when none is.
 */
export function tcbShortfall(actual: SnpTcbParts, minimum: SnpTcbParts): string {
  const parts: Array<[string, number, number]> = [
    ['boot loader', actual.bl, minimum.bl],
    ['TEE (PSP OS)', actual.tee, minimum.tee],
    ['SNP firmware', actual.snp, minimum.snp],
    ['microcode', actual.ucode, minimum.ucode],
    ['FMC', actual.fmc ?? 0, minimum.fmc ?? 0],
  ];
  return parts
    .filter(([, have, want]) => have < want)
    .map(([name, have, want]) => `${name} ${have} < ${want} (by ${want - have})`)
    .join(', ');
}

/** True when all components are equal. */
export function tcbEqual(a: SnpTcbParts, b: SnpTcbParts): boolean {
  return (
    a.bl === b.bl &&
    a.tee === b.tee &&
    a.snp === b.snp &&
    a.ucode === b.ucode &&
    (a.fmc ?? 0) === (b.fmc ?? 0)
  );
}

/** Reads a 72-byte little-endian signature component into 48 big-endian bytes. */
function leComponent(field: Uint8Array): { value: Uint8Array; high: boolean } {
  const value = Uint8Array.from(field.subarray(0, 48)).reverse();
  const high = field.subarray(48).some((b) => b !== 0);
  return { value, high };
}

/**
 * Parses a report. `product` selects the TCB byte layout (Turin differs); it defaults to Milan,
 * as upstream fixes the product to Milan. Throws on a short input or an unsupported version.
 */
export function parseSnpReport(input: Uint8Array, product: AmdProduct = 'milan'): SnpReport {
  if (input.length < SNP_REPORT_SIZE)
    throw new Error(`SEV-SNP report is ${input.length} bytes, want at least ${SNP_REPORT_SIZE}`);
  const raw = Uint8Array.from(input.subarray(0, SNP_REPORT_SIZE));
  const dv = new DataView(raw.buffer);
  const u32 = (o: number) => dv.getUint32(o, true);
  const u64 = (o: number) => dv.getBigUint64(o, true);
  const bytes = (o: number, n: number) => raw.subarray(o, o + n);
  const version = u32(0x00);
  if (!(SNP_REPORT_VERSIONS as readonly number[]).includes(version))
    throw new Error(`SEV-SNP report version ${version} is not supported (want 2 to 5)`);
  const policyRaw = u64(0x08);
  const signerRaw = u32(0x48);
  const keyBits = (signerRaw >> 2) & 0x7;
  const signingKey: SnpSigningKey =
    keyBits === 0 ? 'vcek' : keyBits === 1 ? 'vlek' : keyBits === 7 ? 'none' : 'unknown';
  const r = leComponent(bytes(0x2a0, 72));
  const s = leComponent(bytes(0x2e8, 72));
  const version3 = version >= 3;
  return {
    version,
    guestSvn: u32(0x04),
    policy: {
      abiMinor: Number(policyRaw & 0xffn),
      abiMajor: Number((policyRaw >> 8n) & 0xffn),
      smt: ((policyRaw >> 16n) & 1n) === 1n,
      migrateMa: ((policyRaw >> 18n) & 1n) === 1n,
      debug: ((policyRaw >> 19n) & 1n) === 1n,
      singleSocket: ((policyRaw >> 20n) & 1n) === 1n,
      raw: policyRaw,
    },
    familyId: bytes(0x10, 16),
    imageId: bytes(0x20, 16),
    vmpl: u32(0x30),
    signatureAlgo: u32(0x34),
    currentTcb: decodeTcb(u64(0x38), product),
    platformInfo: u64(0x40),
    signerInfo: {
      authorKeyEn: (signerRaw & 1) === 1,
      maskChipKey: (signerRaw & 2) === 2,
      signingKey,
      raw: signerRaw,
    },
    reportData: bytes(0x50, 64),
    measurement: bytes(0x90, 48),
    hostData: bytes(0xc0, 32),
    idKeyDigest: bytes(0xe0, 48),
    authorKeyDigest: bytes(0x110, 48),
    reportId: bytes(0x140, 32),
    reportIdMa: bytes(0x160, 32),
    reportedTcb: decodeTcb(u64(0x180), product),
    cpuid: version3
      ? { family: raw[0x188] as number, model: raw[0x189] as number, stepping: raw[0x18a] as number }
      : { family: 0, model: 0, stepping: 0 },
    chipId: bytes(0x1a0, 64),
    committedTcb: decodeTcb(u64(0x1e0), product),
    currentVersion: { build: raw[0x1e8] as number, minor: raw[0x1e9] as number, major: raw[0x1ea] as number },
    committedVersion: {
      build: raw[0x1ec] as number,
      minor: raw[0x1ed] as number,
      major: raw[0x1ee] as number,
    },
    launchTcb: decodeTcb(u64(0x1f0), product),
    ...(version >= SNP_MIT_VECTOR_VERSION
      ? { launchMitVector: u64(0x1f8), currentMitVector: u64(0x200) }
      : {}),
    signedBytes: bytes(0, SNP_SIGNED_SIZE),
    signatureR: r.value,
    signatureS: s.value,
    signatureHasHighBytes: r.high || s.high || raw.subarray(0x330, SNP_REPORT_SIZE).some((b) => b !== 0),
    raw,
    trailingBytes: input.length - SNP_REPORT_SIZE,
  };
}

/**
 * The product a version-3 report's CPUID names, or undefined for version 2 (which carries none) and
 * unknown CPUs. Family 0x19 model 0x00–0x0F Milan, 0x10–0x1F and 0xA0–0xAF Genoa; family 0x1A
 * model 0x00–0x11 Turin.
 */
export function productFromCpuid(cpuid: SnpReport['cpuid']): AmdProduct | undefined {
  const { family, model } = cpuid;
  if (family === 0x19 && model <= 0x0f) return 'milan';
  if (family === 0x19 && ((model >= 0x10 && model <= 0x1f) || (model >= 0xa0 && model <= 0xaf)))
    return 'genoa';
  if (family === 0x1a && model <= 0x11) return 'turin';
  return undefined;
}
