/**
 * The {@link Tpm} port on a real TPM 2.0 through tpm2-tools (swtpm in tests and the demo,
 * /dev/tpmrm0 on a VM). Where it sits: the vTPM issuer quotes through it and the node lock's PCR 15
 * marker extends through it.
 *
 * Every operation runs its tools under one deadline, queued per TCTI, with a private temp dir
 * (tpm2-tools-exec.ts). The attestation key follows go-tpm-tools'
 * AttestationKeyRSA (an RSA-2048 restricted RSASSA-SHA256 primary key in the owner hierarchy),
 * persisted at 0x81008F01 and reused when it is already there. With `akTemplateNvIndex` it is instead
 * the key a cloud pre-provisions as a template in NV memory (GCE, nv-template-ak.ts).
 */
import { createHash } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfbootError } from '../../ports/errors.js';
import type { Tpm, TpmQuote } from '../../ports/tpm.js';
import type { CallOptions } from '../../ports/types.js';
import { ensureTemplateAk, readTpmtPublic, type TemplateAkHierarchy } from './nv-template-ak.js';
import {
  matchesRsaAkTemplate,
  parseQuoteInfo,
  TPM_ALG_SHA1,
  TPM_ALG_SHA256,
  TPM_ALG_SHA384,
} from './tpm-structures.js';
import { exchangeThroughNv, nvHandle, readNv } from './tpm2-nv.js';
import { type OperationContext, tpm2Operation } from './tpm2-tools-exec.js';

/** go-tpm-tools' persistent handle for the RSA attestation key. */
export const DEFAULT_AK_HANDLE = 0x81008f01;
/** The TCTI of a kernel resource-managed TPM on a VM. */
export const DEVICE_TCTI = 'device:/dev/tpmrm0';
/** PCRs 0–23, the default quote selection. */
export const ALL_PCRS: readonly number[] = Array.from({ length: 24 }, (_, i) => i);

const AK_ATTRIBUTES = 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|sign';
const SHA256_SIZE = 32;

/** A PCR bank {@link Tpm2ToolsTpm.quoteBank} can quote. */
export type PcrBank = 'sha1' | 'sha256' | 'sha384';
const BANKS: Record<PcrBank, { alg: number; size: number; name: string }> = {
  sha1: { alg: TPM_ALG_SHA1, size: 20, name: 'SHA-1' },
  sha256: { alg: TPM_ALG_SHA256, size: SHA256_SIZE, name: 'SHA-256' },
  sha384: { alg: TPM_ALG_SHA384, size: 48, name: 'SHA-384' },
};
/** The pcrDigest's hash follows the AK's signing scheme; its size tells which one it is. */
const DIGEST_HASH_BY_SIZE: Record<number, string> = { 20: 'sha1', 32: 'sha256', 48: 'sha384', 64: 'sha512' };

/** Options for {@link Tpm2ToolsTpm}. */
export interface Tpm2ToolsTpmOptions {
  /** TCTI string, e.g. `swtpm:host=127.0.0.1,port=2321` or {@link DEVICE_TCTI}. */
  tcti: string;
  /** Persistent handle of the attestation key, default {@link DEFAULT_AK_HANDLE}. */
  akHandle?: number;
  /**
   * Create (and persist) the RSA AK when the handle is empty or holds a key of another template,
   * default true. Set false for a pre-provisioned AK (e.g. Azure's 0x81000003), which is then used as is.
   */
  createAttestationKey?: boolean;
  /**
   * Make the AK from the TPMT_PUBLIC template in this NV index (read with owner authorization) as a
   * primary key in {@link akTemplateHierarchy}, as go-tpm-tools' `GceAttestationKeyRSA` does with GCE's
   * 0x01c10001. It is persisted at {@link akHandle}; a key already there is used only if it is exactly
   * that key, and never replaced. Default: confboot's own AK.
   */
  akTemplateNvIndex?: number;
  /** Hierarchy of the template AK, default `endorsement` (GCE's). */
  akTemplateHierarchy?: TemplateAkHierarchy;
  /** Deadline of one operation (queueing included) when the call gives none, default 20000 ms. */
  timeoutInMs?: number;
  /** Directory holding the tpm2_* executables, default: PATH. */
  toolsDir?: string;
  /** Parent of the private per-operation temp dirs, default the OS temp dir. */
  tmpDir?: string;
}

/** Validates and sorts PCR indices (0–23, no duplicates kept). */
function normalizePcrs(pcrs: readonly number[], operation: string): number[] {
  for (const p of pcrs)
    if (!Number.isInteger(p) || p < 0 || p > 23)
      throw new ConfbootError('invalid-argument', `${operation}: PCR index ${p} is not in 0–23`);
  return [...new Set(pcrs)].sort((a, b) => a - b);
}

/** `[0,1,2,3,7]` → `0-3,7`, for error messages. */
function describePcrs(pcrs: readonly number[]): string {
  const sorted = [...new Set(pcrs)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && (sorted[j + 1] as number) === (sorted[j] as number) + 1) j++;
    parts.push(j > i ? `${sorted[i]}-${sorted[j]}` : String(sorted[i]));
    i = j + 1;
  }
  return parts.join(',') || 'none';
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a).equals(Buffer.from(b));
}

/** The {@link Tpm} port through tpm2-tools. */
export class Tpm2ToolsTpm implements Tpm {
  /** The TCTI this adapter talks to. */
  readonly tcti: string;
  /** Persistent handle of the attestation key. */
  readonly akHandle: number;
  private readonly createAk: boolean;
  private readonly akTemplate: { nvIndex: number; hierarchy: TemplateAkHierarchy } | undefined;
  private readonly timeoutInMs: number;
  private readonly toolsDir: string | undefined;
  private readonly tmpDir: string;
  private akPublic: Uint8Array | undefined;

  constructor(options: Tpm2ToolsTpmOptions) {
    if (!options.tcti) throw new ConfbootError('invalid-argument', 'creating tpm2-tools TPM: empty TCTI');
    this.tcti = options.tcti;
    this.akHandle = options.akHandle ?? DEFAULT_AK_HANDLE;
    this.createAk = options.createAttestationKey ?? true;
    if (options.akTemplateNvIndex !== undefined) {
      const nvIndex = options.akTemplateNvIndex;
      if (!Number.isInteger(nvIndex) || nvIndex < 0x01000000 || nvIndex > 0x01ffffff)
        throw new ConfbootError('invalid-argument', `creating tpm2-tools TPM: ${nvIndex} is not an NV index`);
      if (options.createAttestationKey === false)
        throw new ConfbootError(
          'invalid-argument',
          'creating tpm2-tools TPM: an AK template index needs createAttestationKey (the key is created from it)',
        );
      this.akTemplate = { nvIndex, hierarchy: options.akTemplateHierarchy ?? 'endorsement' };
    }
    this.timeoutInMs = options.timeoutInMs ?? 20_000;
    this.toolsDir = options.toolsDir;
    this.tmpDir = options.tmpDir ?? tmpdir();
  }

  private get akHandleHex(): string {
    return `0x${this.akHandle.toString(16)}`;
  }

  async attestationKeyPublic(options?: CallOptions): Promise<Uint8Array> {
    const cached = this.akPublic;
    if (cached) return new Uint8Array(cached);
    const pub = await this.operation(`loading attestation key ${this.akHandleHex}`, options, (ctx) =>
      this.ensureAk(ctx),
    );
    return new Uint8Array(pub);
  }

  async quote(
    qualifyingData: Uint8Array,
    pcrs: number[] = [...ALL_PCRS],
    options?: CallOptions,
  ): Promise<TpmQuote> {
    return this.quoteBank('sha256', qualifyingData, pcrs, options);
  }

  /**
   * Quotes PCRs of one bank (`sha256` as {@link quote}, or `sha1` for documents that carry every
   * bank like go-tpm-tools'). PCR values come back with the bank's digest size; the quote's
   * pcrDigest uses the AK's signing hash either way.
   */
  async quoteBank(
    bank: PcrBank,
    qualifyingData: Uint8Array,
    pcrs: number[] = [...ALL_PCRS],
    options?: CallOptions,
  ): Promise<TpmQuote> {
    const { alg, size, name } = BANKS[bank];
    const what = `quoting ${name} PCRs ${describePcrs(pcrs)}`;
    const selection = normalizePcrs(pcrs, what);
    if (selection.length === 0) throw new ConfbootError('invalid-argument', `${what}: no PCRs selected`);
    return this.operation(what, options, async (ctx) => {
      await this.ensureAk(ctx);
      const msg = join(ctx.dir, 'quote.msg');
      const sig = join(ctx.dir, 'quote.sig');
      const values = join(ctx.dir, 'quote.pcrs');
      const args = ['-c', this.akHandleHex, '-l', `${bank}:${selection.join(',')}`, '-g', 'sha256'];
      args.push('-m', msg, '-s', sig, '-o', values, '-F', 'values');
      if (qualifyingData.length > 0) args.push('-q', Buffer.from(qualifyingData).toString('hex'));
      // tpm2_quote reads the PCR values after the TPM signed; another TPM user extending in between
      // would make them disagree with the signed digest, so check and retry a few times.
      for (let attempt = 1; ; attempt++) {
        await ctx.run('tpm2_quote', args);
        const quote = new Uint8Array(await readFile(msg));
        const rawSig = new Uint8Array(await readFile(sig));
        const flat = await readFile(values);
        const info = parseQuoteInfo(quote);
        if (!sameBytes(info.extraData, qualifyingData))
          throw new ConfbootError('internal', 'the TPM quoted different qualifying data than requested');
        const sel = info.pcrSelections;
        if (sel.length !== 1 || sel[0]?.hash !== alg || sel[0].pcrs.join() !== selection.join())
          throw new ConfbootError('internal', 'the TPM quoted a different PCR selection than requested');
        if (flat.length !== selection.length * size)
          throw new ConfbootError('internal', `tpm2_quote returned ${flat.length} bytes of PCR values`);
        const digestHash = DIGEST_HASH_BY_SIZE[info.pcrDigest.length];
        if (!digestHash)
          throw new ConfbootError('internal', `quote has a PCR digest of ${info.pcrDigest.length} bytes`);
        if (createHash(digestHash).update(flat).digest().equals(info.pcrDigest)) {
          const pcrValues = new Map<number, Uint8Array>();
          selection.forEach((p, i) => {
            pcrValues.set(p, new Uint8Array(flat.subarray(i * size, (i + 1) * size)));
          });
          return { quote, rawSig, pcrs: pcrValues };
        }
        if (attempt >= 3)
          throw new ConfbootError(
            'unavailable',
            'PCR values kept changing while quoting (another TPM user?)',
          );
      }
    });
  }

  async readPcrs(pcrs: number[], options?: CallOptions): Promise<Map<number, Uint8Array>> {
    const what = `reading SHA-256 PCRs ${describePcrs(pcrs)}`;
    const selection = normalizePcrs(pcrs, what);
    if (selection.length === 0) return new Map();
    return this.operation(what, options, async (ctx) => {
      const out = join(ctx.dir, 'pcrs');
      await ctx.run('tpm2_pcrread', [`sha256:${selection.join(',')}`, '-o', out]);
      const flat = await readFile(out);
      if (flat.length !== selection.length * SHA256_SIZE)
        throw new ConfbootError(
          'internal',
          `tpm2_pcrread returned ${flat.length} bytes for ${selection.length} PCRs`,
        );
      const result = new Map<number, Uint8Array>();
      selection.forEach((p, i) => {
        result.set(p, new Uint8Array(flat.subarray(i * SHA256_SIZE, (i + 1) * SHA256_SIZE)));
      });
      return result;
    });
  }

  async pcrEvent(pcr: number, data: Uint8Array, options?: CallOptions): Promise<void> {
    const what = `recording an event in PCR ${pcr}`;
    normalizePcrs([pcr], what);
    await this.operation(what, options, async (ctx) => {
      const file = join(ctx.dir, 'event');
      await writeFile(file, data, { mode: 0o600 });
      await ctx.run('tpm2_pcrevent', [String(pcr), file]);
    });
  }

  /**
   * Reads NV index `index` whole with owner authorization (`tpm2_nvread -C o`), in this TCTI's queue:
   * an NV read starts an authorization session, which a TPM without a resource manager (swtpm,
   * /dev/tpm0) cannot hold next to another tool's.
   * @throws ConfbootError `unavailable` when the read fails (e.g. no such index), `internal` when
   *   tpm2-tools is missing, `deadline-exceeded` on timeout
   */
  async readNvIndex(index: number, options?: CallOptions): Promise<Uint8Array> {
    const handle = nvHandle(index);
    return this.operation(`reading TPM NV index ${handle}`, options, (ctx) => readNv(ctx, handle));
  }

  /**
   * A vendor command that works on an NV index (AWS NitroTPM's NSM request), in this TCTI's queue:
   * see {@link exchangeThroughNv}.
   * @throws ConfbootError `unavailable` when the TPM refuses a step (the response code is named)
   */
  async vendorNvExchange(
    request: Uint8Array,
    command: (nvIndex: number) => Uint8Array,
    size: number,
    options?: CallOptions,
  ): Promise<Uint8Array> {
    return this.operation('exchanging a vendor command through a TPM NV index', options, (ctx) =>
      exchangeThroughNv(ctx, request, command, size),
    );
  }

  /** Returns the AK's TPMT_PUBLIC, creating and persisting the key if needed. Runs inside the queue. */
  private async ensureAk(ctx: OperationContext): Promise<Uint8Array> {
    if (this.akPublic) return this.akPublic;
    if (this.akTemplate) {
      const pub = await ensureTemplateAk(ctx, { ...this.akTemplate, akHandle: this.akHandle });
      this.akPublic = pub;
      return pub;
    }
    const handles = await ctx.run('tpm2_getcap', ['handles-persistent']);
    const present = [...handles.matchAll(/0x[0-9a-f]+/gi)].some(
      (m) => Number.parseInt(m[0], 16) === this.akHandle,
    );
    if (present) {
      const pub = await this.readPublic(ctx);
      if (!this.createAk || matchesRsaAkTemplate(pub)) {
        this.akPublic = pub;
        return pub;
      }
      // As go-tpm-tools' cached keys: a key of another template at our handle is replaced.
      await ctx.run('tpm2_evictcontrol', ['-C', 'o', '-c', this.akHandleHex]);
    } else if (!this.createAk) {
      throw new ConfbootError(
        'failed-precondition',
        `no attestation key at persistent handle ${this.akHandleHex}`,
      );
    }
    const context = join(ctx.dir, 'ak.ctx');
    let failure: unknown;
    try {
      await ctx.run('tpm2_createprimary', [
        ...['-C', 'o', '-G', 'rsa2048:rsassa-sha256:null', '-g', 'sha256'],
        ...['-a', AK_ATTRIBUTES, '-c', context],
      ]);
      await ctx.run('tpm2_evictcontrol', ['-C', 'o', '-c', context, this.akHandleHex]);
    } catch (err) {
      failure = err;
    }
    // Without a resource manager the primary (and the copy evictcontrol loaded) stay resident.
    await ctx.run('tpm2_flushcontext', ['-t']).catch((err: unknown) => {
      failure ??= err;
    });
    if (failure !== undefined) throw failure;
    const pub = await this.readPublic(ctx);
    this.akPublic = pub;
    return pub;
  }

  /** TPMT_PUBLIC of the AK: tpm2_readpublic's `tss` format is a TPM2B_PUBLIC, so drop its size. */
  private readPublic(ctx: OperationContext): Promise<Uint8Array> {
    return readTpmtPublic(ctx, this.akHandleHex, join(ctx.dir, 'ak.pub'));
  }

  /** Queues `body` on this TCTI with a private temp dir and one deadline; wraps errors with `what`. */
  private operation<T>(
    what: string,
    options: CallOptions | undefined,
    body: (ctx: OperationContext) => Promise<T>,
  ): Promise<T> {
    return tpm2Operation(
      {
        what,
        tcti: this.tcti,
        tmpDir: this.tmpDir,
        toolsDir: this.toolsDir,
        timeoutInMs: options?.timeoutInMs ?? this.timeoutInMs,
        ...(options?.signal ? { signal: options.signal } : {}),
      },
      body,
    );
  }
}
