/**
 * Honest nodes and attacker issuers for the attack suite. Honest nodes quote with a real swtpm
 * (through tpm2-tools and the production vTPM issuer) or with the in-process SoftTpm (genuine TPM
 * 2.0 wire structures); both measure the demo image's boot into PCRs 4, 9 and 12 the way firmware
 * would. Attackers wrap or replace an issuer: replaying a captured document, attesting someone
 * else's key, mutating a fresh genuine document, or sending arbitrary bytes under any OID.
 * Test code only.
 */
import { createHash } from 'node:crypto';
import {
  decodeVtpmDocument,
  encodeVtpmDocument,
  type VtpmDocument,
} from '../../../src/adapters/attestation/shared/vtpm-document.js';
import { createQemuVtpmIssuer } from '../../../src/adapters/attestation/vtpm/issuer.js';
import { type SwtpmInstance, startSwtpm } from '../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { variantOid } from '../../../src/app/registry/index.js';
import type { Issuer } from '../../../src/ports/issuer.js';
import type { CallOptions } from '../../../src/ports/types.js';
import type { Variant } from '../../../src/ports/variant.js';
import { type BootEvent, GOOD_BOOT, measureBoot } from '../../../src/testbed/demo/boot-measurements.js';
import { SoftTpm, type SoftTpmOptions, SoftVtpmIssuer } from '../../support/soft-tpm.js';

/** A node with a real swtpm, booted (measured) like the demo image. */
export interface SwtpmNode {
  swtpm: SwtpmInstance;
  tpm: Tpm2ToolsTpm;
  /** The production qemu-vtpm issuer on this TPM. */
  issuer: Issuer;
  stop(): Promise<void>;
}

/** Starts a swtpm, extends the boot measurements `boot` (default the good boot) and builds the issuer. */
export async function startSwtpmNode(boot: readonly BootEvent[] = GOOD_BOOT): Promise<SwtpmNode> {
  const swtpm = await startSwtpm();
  try {
    const tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
    await measureBoot(tpm, boot);
    return {
      swtpm,
      tpm,
      issuer: createQemuVtpmIssuer(tpm, { oid: variantOid('qemu-vtpm') }),
      stop: () => swtpm.stop(),
    };
  } catch (err) {
    await swtpm.stop();
    throw err;
  }
}

/** A SoftTpm booted with `boot` (default the good boot). */
export async function softTpmNode(
  boot: readonly BootEvent[] = GOOD_BOOT,
  options: SoftTpmOptions = {},
): Promise<SoftTpm> {
  const tpm = SoftTpm.create(options);
  await measureBoot(tpm, boot);
  return tpm;
}

/** An issuer that wraps another: same variant and OID, its own issue(). */
abstract class WrappingIssuer implements Issuer {
  constructor(protected readonly inner: Issuer) {}
  get variant(): Variant {
    return this.inner.variant;
  }
  get oid(): string {
    return this.inner.oid;
  }
  abstract issue(userData: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<Uint8Array>;
}

/** Wraps an issuer and keeps every document it issued with the nonce and user data it bound. */
export class CapturingIssuer extends WrappingIssuer {
  readonly captured: Array<{ document: Uint8Array; nonce: Uint8Array; userData: Uint8Array }> = [];
  override async issue(userData: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    const document = await this.inner.issue(userData, nonce, options);
    this.captured.push({ document, nonce, userData });
    return document;
  }
}

/** Sends fixed bytes under a fixed OID on every connection (replay, garbage, foreign formats). */
export class FixedDocumentIssuer implements Issuer {
  constructor(
    readonly variant: Variant,
    private readonly document: () => Uint8Array,
    readonly oid: string = variantOid(variant),
  ) {}
  async issue(): Promise<Uint8Array> {
    return this.document();
  }
}

/**
 * Attests this connection's nonce with a genuine TPM, but binds the SHA-256 of another SPKI as user
 * data (the attestation does not commit to the TLS key the attacker holds).
 */
export class ForeignKeyIssuer extends WrappingIssuer {
  constructor(
    inner: Issuer,
    readonly foreignSpkiHash: Uint8Array,
  ) {
    super(inner);
  }
  override issue(_userData: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    return this.inner.issue(this.foreignSpkiHash, nonce, options);
  }
}

/**
 * Issues a genuine document for THIS connection (right nonce, right key), then changes it: the
 * mutation gets the decoded document, or the raw bytes when it asks for them.
 */
export class MutatingIssuer extends WrappingIssuer {
  constructor(
    inner: Issuer,
    private readonly mutate: (doc: VtpmDocument) => VtpmDocument,
  ) {
    super(inner);
  }
  override async issue(userData: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    const genuine = await this.inner.issue(userData, nonce, options);
    return encodeVtpmDocument(this.mutate(decodeVtpmDocument(genuine)));
  }
}

/** Issues a genuine document for this connection and cuts it to `keep` of its bytes. */
export class TruncatingIssuer extends WrappingIssuer {
  constructor(
    inner: Issuer,
    private readonly keep: (length: number) => number,
  ) {
    super(inner);
  }
  override async issue(userData: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    const genuine = await this.inner.issue(userData, nonce, options);
    return genuine.subarray(0, this.keep(genuine.length));
  }
}

/** Flips one bit of `bytes` at `index` (negative: from the end), returning a copy. */
export function flipBit(bytes: Uint8Array, index: number): Uint8Array {
  const out = Uint8Array.from(bytes);
  const i = index < 0 ? out.length + index : index;
  out[i] = (out[i] as number) ^ 0x01;
  return out;
}

/** SHA-256 of `data` (user data of an SPKI, or a boot event digest). */
export function sha256(data: Uint8Array | string): Uint8Array {
  return new Uint8Array(createHash('sha256').update(data).digest());
}

/** Returns a copy of `doc` with `f` applied to its SHA-256 quote (quotes of other banks kept). */
export function withSha256Quote(
  doc: VtpmDocument,
  f: (q: VtpmDocument['attestation']['quotes'][number]) => VtpmDocument['attestation']['quotes'][number],
): VtpmDocument {
  return {
    ...doc,
    attestation: {
      ...doc.attestation,
      quotes: doc.attestation.quotes.map((q) => (q.pcrHashAlg === 0x000b ? f(q) : q)),
    },
  };
}

export { GOOD_BOOT, SoftTpm, SoftVtpmIssuer };
