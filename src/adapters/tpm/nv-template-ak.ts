/**
 * An attestation key made from a key template kept in TPM NV memory, as GCE provisions its vTPMs
 * (go-tpm-tools `GceAttestationKeyRSA`: read the marshalled TPMT_PUBLIC at NV index 0x01c10001 with
 * owner authorization, and create a PRIMARY key from exactly that template in the ENDORSEMENT
 * hierarchy). Primary keys are derived from the hierarchy's seed and the template, so this yields the
 * very key GCE certifies and publishes as the instance's shielded-identity signing key. Where it
 * sits: the tpm2-tools TPM adapter (tpm2-tools-tpm.ts) calls {@link ensureTemplateAk} inside its
 * per-TCTI queue when it is configured with an AK template index.
 *
 * tpm2_createprimary builds its template from options (-G/-g/-a/-L/-u); the template it really sent
 * (`--template-data`) is compared byte for byte with the NV template, and the created key's public
 * area with the template up to `unique`, so a template tpm2-tools cannot reproduce is refused, never
 * approximated. The key is persisted at the AK handle; a key already there is reused only if it is
 * exactly the key the template yields, and never replaced.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfbootError, wrapError } from '../../ports/errors.js';
import { hashName, TpmAlg, TpmaObject, TpmReader } from './tpm2-wire.js';

/** NV index of GCE's RSA AK certificate (go-tpm-tools `GceAKCertNVIndexRSA`). */
export const GCE_AK_CERT_NV_INDEX_RSA = 0x01c10000;
/** NV index of GCE's RSA AK template (go-tpm-tools `GceAKTemplateNVIndexRSA`). */
export const GCE_AK_TEMPLATE_NV_INDEX_RSA = 0x01c10001;
/** NV index of GCE's ECC AK certificate (go-tpm-tools `GceAKCertNVIndexECC`). */
export const GCE_AK_CERT_NV_INDEX_ECC = 0x01c10002;
/** NV index of GCE's ECC AK template (go-tpm-tools `GceAKTemplateNVIndexECC`). */
export const GCE_AK_TEMPLATE_NV_INDEX_ECC = 0x01c10003;

/** The hierarchy a template AK is created in; GCE's is the endorsement hierarchy. */
export type TemplateAkHierarchy = 'endorsement' | 'owner';

/** Runs tpm2-tools for one queued TPM operation: its private temp dir and a bound tool runner. */
export interface TpmToolContext {
  /** A private (0700) directory removed after the operation. */
  dir: string;
  /** Runs one tpm2-tools executable with these arguments; resolves to its stdout. */
  run(tool: string, args: string[]): Promise<string>;
}

/** A TPMT_PUBLIC key template, as far as tpm2_createprimary needs it. */
export interface AkTemplate {
  /** The exact template bytes. */
  raw: Uint8Array;
  /** TPM_ALG_RSA or TPM_ALG_ECC. */
  type: number;
  nameAlg: number;
  /** TPMA_OBJECT bits. */
  attributes: number;
  authPolicy: Uint8Array;
  /** Signing scheme and its hash (both TPM_ALG_NULL when the key allows any). */
  scheme: number;
  schemeHash: number;
  /** RSA modulus size in bits (0 for ECC). */
  rsaBits: number;
  /** RSA exponent as carried (0 = 65537). */
  exponent: number;
  /** TPM_ECC_CURVE (0 for RSA). */
  curveId: number;
  /** Offset of the `unique` field in {@link raw}: everything before it must match the created key. */
  uniqueOffset: number;
  /** `unique`: RSA `[n]`, ECC `[x, y]`; it seeds the key derivation, so it is passed on exactly. */
  unique: Uint8Array[];
}

const RSA_BITS = new Set([1024, 2048, 3072, 4096]);
const CURVE_NAMES: Record<number, string> = { 3: 'ecc256', 4: 'ecc384', 5: 'ecc521' };
const SCHEME_NAMES: Record<number, string> = {
  [TpmAlg.RSASSA]: 'rsassa',
  [TpmAlg.RSAPSS]: 'rsapss',
  [TpmAlg.ECDSA]: 'ecdsa',
};
/** Sizes of tpm2-tools' TPMU_PUBLIC_ID buffers (TPM2B_PUBLIC_KEY_RSA, TPM2B_ECC_PARAMETER). */
const MAX_RSA_UNIQUE = 512;
const MAX_ECC_COORDINATE = 128;

function hex(n: number): string {
  return `0x${n.toString(16)}`;
}

function reader(raw: Uint8Array): TpmReader {
  return new TpmReader(raw, 'ak-template', 'the AK template (TPMT_PUBLIC)');
}

/**
 * Parses a TPMT_PUBLIC key template (no size prefix, as go-tpm's `DecodePublic` reads NV templates).
 * Unlike a key's public area, `unique` may be empty or zero. Only what an attestation key can be is
 * accepted: an RSA or ECC restricted signing key without a symmetric algorithm.
 * @throws ConfbootError `failed-precondition` naming the problem
 */
export function parseAkTemplate(raw: Uint8Array): AkTemplate {
  try {
    const r = reader(raw);
    const type = r.u16('type');
    const nameAlg = r.u16('nameAlg');
    const attributes = r.u32('objectAttributes');
    const authPolicy = r.tpm2b('authPolicy', 64);
    if (type !== TpmAlg.RSA && type !== TpmAlg.ECC) throw r.fail(`type ${hex(type)} is not RSA or ECC`);
    const symmetric = r.u16('symmetric.algorithm');
    if (symmetric !== TpmAlg.NULL)
      throw r.fail(`symmetric algorithm ${hex(symmetric)} is set (a signing key has none)`);
    const scheme = r.u16('scheme');
    const schemeHash = scheme === TpmAlg.NULL ? TpmAlg.NULL : r.u16('scheme.hashAlg');
    let rsaBits = 0;
    let exponent = 0;
    let curveId = 0;
    let unique: Uint8Array[];
    let uniqueOffset: number;
    if (type === TpmAlg.RSA) {
      rsaBits = r.u16('keyBits');
      exponent = r.u32('exponent');
      uniqueOffset = r.position;
      unique = [r.tpm2b('unique.rsa', MAX_RSA_UNIQUE)];
    } else {
      curveId = r.u16('curveID');
      const kdf = r.u16('kdf.scheme');
      if (kdf !== TpmAlg.NULL) throw r.fail(`ECC KDF ${hex(kdf)} is set (tpm2-tools cannot express it)`);
      uniqueOffset = r.position;
      unique = [r.tpm2b('unique.ecc.x', MAX_ECC_COORDINATE), r.tpm2b('unique.ecc.y', MAX_ECC_COORDINATE)];
    }
    r.end();
    return {
      raw,
      type,
      nameAlg,
      attributes,
      authPolicy,
      scheme,
      schemeHash,
      rsaBits,
      exponent,
      curveId,
      uniqueOffset,
      unique,
    };
  } catch (err) {
    throw wrapError('reading the AK template', err, 'failed-precondition');
  }
}

/** tpm2_createprimary's arguments for `template`, and the files they name (written by the caller). */
export interface CreatePrimaryPlan {
  /** Arguments, without -c/--template-data/-o. */
  args: string[];
  /** Policy digest for `-L`, when the template has one. */
  policy?: Uint8Array;
  /** `-u` contents (tpm2-tools' little-endian TPMU_PUBLIC_ID layout), when `unique` is not empty. */
  uniqueData?: Uint8Array;
}

/**
 * Maps a template to tpm2_createprimary options: `-C e|o`, `-g` nameAlg, `-G` key type, size or
 * curve, scheme and (null) symmetric algorithm, `-a` the raw attribute bits, `-L` the policy, `-u`
 * the unique field.
 * @throws ConfbootError `failed-precondition` for a template tpm2-tools cannot express or that is not
 *   a restricted signing key
 */
export function createPrimaryPlan(t: AkTemplate, hierarchy: TemplateAkHierarchy): CreatePrimaryPlan {
  const refuse = (why: string) =>
    new ConfbootError('failed-precondition', `creating the AK from its template: ${why}`);
  const sign = (t.attributes & TpmaObject.sign) !== 0;
  const restricted = (t.attributes & TpmaObject.restricted) !== 0;
  const decrypt = (t.attributes & TpmaObject.decrypt) !== 0;
  if (!sign || !restricted || decrypt)
    throw refuse(`attributes ${hex(t.attributes)} are not those of a restricted signing key`);
  const nameAlg = hashName(t.nameAlg);
  if (!nameAlg) throw refuse(`unsupported name algorithm ${hex(t.nameAlg)}`);
  let scheme = 'null';
  if (t.scheme !== TpmAlg.NULL) {
    const name = SCHEME_NAMES[t.scheme];
    const hash = hashName(t.schemeHash);
    if (!name || !hash) throw refuse(`unsupported signing scheme ${hex(t.scheme)}/${hex(t.schemeHash)}`);
    scheme = `${name}-${hash}`;
  }
  let key: string;
  let uniqueData: Uint8Array | undefined;
  if (t.type === TpmAlg.RSA) {
    if (!RSA_BITS.has(t.rsaBits)) throw refuse(`unsupported RSA key size ${t.rsaBits}`);
    if (t.exponent !== 0) throw refuse(`RSA exponent ${t.exponent} is set (tpm2-tools sends 0 only)`);
    key = `rsa${t.rsaBits}`;
    const n = t.unique[0] as Uint8Array;
    if (n.length > 0) {
      uniqueData = new Uint8Array(2 + n.length);
      new DataView(uniqueData.buffer).setUint16(0, n.length, true);
      uniqueData.set(n, 2);
    }
  } else {
    const curve = CURVE_NAMES[t.curveId];
    if (!curve) throw refuse(`unsupported ECC curve ${hex(t.curveId)}`);
    key = curve;
    const [x, y] = t.unique as [Uint8Array, Uint8Array];
    if (x.length > 0 || y.length > 0) {
      // struct { TPM2B_ECC_PARAMETER x, y }: each a little-endian size and a 128-byte buffer.
      const slot = 2 + MAX_ECC_COORDINATE;
      uniqueData = new Uint8Array(slot + 2 + y.length);
      const view = new DataView(uniqueData.buffer);
      view.setUint16(0, x.length, true);
      uniqueData.set(x, 2);
      view.setUint16(slot, y.length, true);
      uniqueData.set(y, slot + 2);
    }
  }
  const args = ['-C', hierarchy === 'endorsement' ? 'e' : 'o', '-g', nameAlg, '-G', `${key}:${scheme}:null`];
  args.push('-a', `0x${t.attributes.toString(16).padStart(8, '0')}`);
  return {
    args,
    ...(t.authPolicy.length > 0 ? { policy: t.authPolicy } : {}),
    ...(uniqueData ? { uniqueData } : {}),
  };
}

/** True if `tpmtPublic` (a created key) carries the template's fields up to `unique`. */
export function matchesTemplate(tpmtPublic: Uint8Array, t: AkTemplate): boolean {
  const n = t.uniqueOffset;
  return (
    tpmtPublic.length > n && Buffer.from(tpmtPublic.subarray(0, n)).equals(Buffer.from(t.raw.subarray(0, n)))
  );
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.from(a).equals(Buffer.from(b));
}

/** True if `handle` is listed by `tpm2_getcap <capability>` (handles-persistent, handles-nv-index). */
export async function tpmHasHandle(
  ctx: TpmToolContext,
  capability: string,
  handle: number,
): Promise<boolean> {
  const out = await ctx.run('tpm2_getcap', [capability]);
  return [...out.matchAll(/0x[0-9a-f]+/gi)].some((m) => Number.parseInt(m[0], 16) === handle);
}

/**
 * TPMT_PUBLIC of a loaded object (`tpm2_readpublic -f tss` writes a TPM2B_PUBLIC: its size is
 * checked and dropped).
 */
export async function readTpmtPublic(ctx: TpmToolContext, object: string, file: string): Promise<Uint8Array> {
  await ctx.run('tpm2_readpublic', ['-c', object, '-f', 'tss', '-o', file]);
  const tpm2b = await readFile(file);
  const size = tpm2b.length >= 2 ? tpm2b.readUInt16BE(0) : -1;
  if (size !== tpm2b.length - 2)
    throw new ConfbootError(
      'internal',
      `tpm2_readpublic wrote a malformed TPM2B_PUBLIC (${tpm2b.length} bytes)`,
    );
  return new Uint8Array(tpm2b.subarray(2));
}

/** Where {@link ensureTemplateAk} finds the template and keeps the key. */
export interface TemplateAkOptions {
  /** NV index holding the TPMT_PUBLIC template, e.g. {@link GCE_AK_TEMPLATE_NV_INDEX_RSA}. */
  nvIndex: number;
  /** Hierarchy of the primary key; GCE: endorsement. */
  hierarchy: TemplateAkHierarchy;
  /** Persistent handle the key is kept at. */
  akHandle: number;
}

/**
 * Returns the TPMT_PUBLIC of the AK made from the template at `nvIndex`: reads the template (owner
 * authorization), creates the primary key from exactly that template, and persists it at `akHandle`
 * — or, if a key is already persisted there, checks that it is this very key and keeps it. Flushes
 * every transient object it made. Must run inside the adapter's queue.
 * @throws ConfbootError `failed-precondition` when the index is missing, does not hold a usable
 *   template, tpm2-tools cannot reproduce it, or another key occupies `akHandle`
 */
export async function ensureTemplateAk(ctx: TpmToolContext, options: TemplateAkOptions): Promise<Uint8Array> {
  const index = hex(options.nvIndex);
  const handle = hex(options.akHandle);
  if (!(await tpmHasHandle(ctx, 'handles-nv-index', options.nvIndex)))
    throw new ConfbootError(
      'failed-precondition',
      `NV index ${index} (the AK template) is not defined on this TPM; it is provisioned by the cloud (GCE) and cannot be made here`,
    );
  const templateFile = join(ctx.dir, 'ak-template.bin');
  await ctx.run('tpm2_nvread', ['-C', 'o', index, '-o', templateFile]);
  let template: AkTemplate;
  let plan: CreatePrimaryPlan;
  try {
    template = parseAkTemplate(new Uint8Array(await readFile(templateFile)));
    plan = createPrimaryPlan(template, options.hierarchy);
  } catch (err) {
    throw wrapError(`NV index ${index}`, err, 'failed-precondition');
  }

  const args = [...plan.args];
  if (plan.policy) {
    const file = join(ctx.dir, 'ak-policy.bin');
    await writeFile(file, plan.policy, { mode: 0o600 });
    args.push('-L', file);
  }
  if (plan.uniqueData) {
    const file = join(ctx.dir, 'ak-unique.bin');
    await writeFile(file, plan.uniqueData, { mode: 0o600 });
    args.push('-u', file);
  }
  const context = join(ctx.dir, 'ak-primary.ctx');
  const sent = join(ctx.dir, 'ak-sent-template.bin');
  const created = join(ctx.dir, 'ak-primary.pub');
  args.push('-c', context, '--template-data', sent, '-f', 'tpmt', '-o', created);

  let failure: unknown;
  let result: Uint8Array | undefined;
  try {
    await ctx.run('tpm2_createprimary', args);
    const sentBytes = new Uint8Array(await readFile(sent));
    // tpm2-tools 5.4 writes the TPMT_PUBLIC; its man page says TPM2B_PUBLIC, so accept both.
    const sentTemplate =
      sentBytes.length === template.raw.length + 2 &&
      new DataView(sentBytes.buffer).getUint16(0) === template.raw.length
        ? sentBytes.subarray(2)
        : sentBytes;
    if (!sameBytes(sentTemplate, template.raw))
      throw new ConfbootError(
        'failed-precondition',
        `tpm2_createprimary did not send the exact template of NV index ${index} (sent ${sentTemplate.length} bytes, template ${template.raw.length}); refusing a key that is not the provisioned AK`,
      );
    const pub = new Uint8Array(await readFile(created));
    if (!matchesTemplate(pub, template))
      throw new ConfbootError(
        'failed-precondition',
        `the key created from the template of NV index ${index} does not carry that template's parameters`,
      );
    if (await tpmHasHandle(ctx, 'handles-persistent', options.akHandle)) {
      const persisted = await readTpmtPublic(ctx, handle, join(ctx.dir, 'ak-persisted.pub'));
      if (!sameBytes(persisted, pub))
        throw new ConfbootError(
          'failed-precondition',
          `persistent handle ${handle} holds ${
            matchesTemplate(persisted, template)
              ? `a key of the same template but not the one this TPM's ${options.hierarchy} hierarchy yields`
              : 'a key of another template'
          }, not the AK from NV index ${index}; refusing to replace it (evict it with tpm2_evictcontrol -C o -c ${handle}, or configure another AK handle)`,
        );
    } else {
      await ctx.run('tpm2_evictcontrol', ['-C', 'o', '-c', context, handle]);
      const persisted = await readTpmtPublic(ctx, handle, join(ctx.dir, 'ak-persisted.pub'));
      if (!sameBytes(persisted, pub))
        throw new ConfbootError('internal', `the key persisted at ${handle} is not the one just created`);
    }
    result = pub;
  } catch (err) {
    failure = err;
  }
  // Without a resource manager the primary (and the copy evictcontrol loaded) stay resident.
  await ctx.run('tpm2_flushcontext', ['-t']).catch((err: unknown) => {
    failure ??= err;
  });
  if (failure !== undefined || result === undefined) throw failure;
  return result;
}
