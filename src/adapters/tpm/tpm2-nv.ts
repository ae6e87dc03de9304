/**
 * TPM NV memory through tpm2-tools (adapter layer, src/adapters/tpm): reading an NV index whole with
 * owner authorization (GCE's AK template, Azure's AK certificate) and a vendor command that works on
 * an NV index (AWS NitroTPM's NSM request). Each runs inside one tpm2-tools operation (its TCTI
 * queue, deadline and private temp dir, tpm2-tools-exec.ts); {@link Tpm2ToolsTpm} starts them.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfbootError } from '../../ports/errors.js';
import { type OperationContext, Tpm2ToolError } from './tpm2-tools-exec.js';

/** The `0x01xxxxxx` handle of NV index `index`; throws `invalid-argument` outside the NV range. */
export function nvHandle(index: number): string {
  if (!Number.isInteger(index) || index < 0x01000000 || index > 0x01ffffff)
    throw new ConfbootError('invalid-argument', `reading TPM NV index: ${index} is not an NV index`);
  return `0x${index.toString(16).padStart(8, '0')}`;
}

/**
 * A tool that ran and refused (no such index, no read permission, TPM busy) is `unavailable`, not
 * a bug here (`internal`); anything else is returned as it is.
 */
export function refusedByTpm(err: unknown): unknown {
  return err instanceof Tpm2ToolError && err.exitCode !== undefined && err.code === 'internal'
    ? new Tpm2ToolError('unavailable', err.tool, err.exitCode, err.stderr, err.message, err)
    : err;
}

/** Reads the NV index `handle` whole with owner authorization (`tpm2_nvread -C o`). */
export async function readNv(ctx: OperationContext, handle: string): Promise<Uint8Array> {
  const file = join(ctx.dir, 'nv.bin');
  try {
    await ctx.run('tpm2_nvread', ['-C', 'o', handle, '-o', file]);
  } catch (err) {
    throw refusedByTpm(err);
  }
  return new Uint8Array(await readFile(file));
}

/**
 * Defines a free owner index of `size` bytes (authread|authwrite, empty auth) in
 * 0x01000100–0x010001ff, writes `request` to it, sends `command(index)` raw (tpm2_send), reads the
 * index back whole and always undefines it.
 * @throws ConfbootError `unavailable` when the TPM refuses a step (the response code is named)
 */
export async function exchangeThroughNv(
  ctx: OperationContext,
  request: Uint8Array,
  command: (nvIndex: number) => Uint8Array,
  size: number,
): Promise<Uint8Array> {
  const used = new Set(
    [...(await ctx.run('tpm2_getcap', ['handles-nv-index'])).matchAll(/0x[0-9a-f]+/gi)].map((m) =>
      Number.parseInt(m[0], 16),
    ),
  );
  let index = 0x01000100;
  while (used.has(index) && index < 0x010001ff) index++;
  if (used.has(index)) throw new ConfbootError('unavailable', 'no free NV index in 0x01000100–0x010001ff');
  const handle = `0x${index.toString(16).padStart(8, '0')}`;
  try {
    await ctx.run('tpm2_nvdefine', [handle, '-C', 'o', '-s', String(size), '-a', 'authread|authwrite']);
  } catch (err) {
    throw refusedByTpm(err);
  }
  try {
    const req = join(ctx.dir, 'request.bin');
    const cmd = join(ctx.dir, 'command.bin');
    const res = join(ctx.dir, 'response.bin');
    const out = join(ctx.dir, 'nv.bin');
    await writeFile(req, request, { mode: 0o600 });
    await writeFile(cmd, command(index), { mode: 0o600 });
    await ctx.run('tpm2_nvwrite', [handle, '-C', handle, '-i', req]);
    await ctx.run('tpm2_send', ['-o', res, cmd]);
    const response = await readFile(res);
    const rc = response.length >= 10 ? response.readUInt32BE(6) : -1;
    if (rc !== 0)
      throw new ConfbootError(
        'unavailable',
        `vendor command answered ${rc < 0 ? `${response.length} bytes` : `TPM_RC 0x${rc.toString(16)}`}${rc === 0x143 ? ' (TPM_RC_COMMAND_CODE: this TPM does not know it)' : ''}`,
      );
    await ctx.run('tpm2_nvread', [handle, '-C', handle, '-s', String(size), '-o', out]);
    return new Uint8Array(await readFile(out));
  } catch (err) {
    throw refusedByTpm(err);
  } finally {
    await ctx.run('tpm2_nvundefine', [handle, '-C', 'o']).catch(() => undefined);
  }
}
