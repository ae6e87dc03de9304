/** TPM NV memory through tpm2-tools on a real swtpm: reads, refusals and the vendor exchange's cleanup. */

import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { exchangeThroughNv, nvHandle, readNv, refusedByTpm } from '../../../src/adapters/tpm/tpm2-nv.js';
import {
  type OperationContext,
  Tpm2ToolError,
  tpm2Operation,
} from '../../../src/adapters/tpm/tpm2-tools-exec.js';
import { useSwtpm } from '../../support/swtpm.js';
import { useTmpDirs } from '../../support/tmp.js';
import { tpm2 } from './tpm-test-helpers.js';

const swtpm = useSwtpm();
const tmp = useTmpDirs();

function inOperation<T>(tcti: string, body: (ctx: OperationContext) => Promise<T>): Promise<T> {
  return tpm2Operation(
    { what: 'testing', tcti, tmpDir: tmpdir(), toolsDir: undefined, timeoutInMs: 20_000 },
    body,
  );
}

const nvIndices = async (tcti: string) =>
  [...(await tpm2(tcti, 'tpm2_getcap', ['handles-nv-index'])).matchAll(/0x[0-9a-f]+/gi)].map((m) => m[0]);

describe('TPM NV memory through tpm2-tools', () => {
  it('nvHandle names an NV index and refuses anything outside the NV range', () => {
    expect(nvHandle(0x01c10001)).toBe('0x01c10001');
    expect(() => nvHandle(0x81000001)).toThrow(/is not an NV index/);
    expect(() => nvHandle(1.5)).toThrow(/is not an NV index/);
  });

  it('reads an owner-readable index whole', async () => {
    const s = await swtpm();
    const data = join(tmp(), 'data');
    await writeFile(data, Buffer.from('template bytes'));
    await tpm2(s.tcti, 'tpm2_nvdefine', ['0x01c10001', '-C', 'o', '-s', '14', '-a', 'ownerread|ownerwrite']);
    await tpm2(s.tcti, 'tpm2_nvwrite', ['0x01c10001', '-C', 'o', '-i', data]);
    const read = await inOperation(s.tcti, (ctx) => readNv(ctx, '0x01c10001'));
    expect(Buffer.from(read).toString()).toBe('template bytes');
  });

  it('an index that does not exist: the TPM refused, so unavailable (not internal)', async () => {
    const s = await swtpm();
    const err = await inOperation(s.tcti, (ctx) => readNv(ctx, '0x01c10002')).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'unavailable' });
    expect((err as Error).cause).toBeInstanceOf(Tpm2ToolError);
  });

  it('refusedByTpm turns only a tool that ran and failed into unavailable', () => {
    const ran = new Tpm2ToolError('internal', 'tpm2_nvread', 1, 'ERROR: 0x18b', 'failed');
    expect(refusedByTpm(ran)).toMatchObject({
      code: 'unavailable',
      tool: 'tpm2_nvread',
      stderr: 'ERROR: 0x18b',
    });
    const missing = new Tpm2ToolError('internal', 'tpm2_nvread', undefined, '', 'not installed');
    expect(refusedByTpm(missing)).toBe(missing);
    const other = new Error('x');
    expect(refusedByTpm(other)).toBe(other);
  });

  it('a vendor command the TPM does not know is named, and the NV index is undefined again', async () => {
    const s = await swtpm();
    const before = await nvIndices(s.tcti);
    // TPM2_CC 0x20000001 (a vendor command code): header tag 0x8001, size 10.
    const command = () => Buffer.from([0x80, 0x01, 0, 0, 0, 10, 0x20, 0, 0, 1]);
    const err = await inOperation(s.tcti, (ctx) =>
      exchangeThroughNv(ctx, new Uint8Array(16).fill(1), command, 16),
    ).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'unavailable' });
    expect((err as Error).message).toMatch(/vendor command answered TPM_RC 0x/);
    expect(await nvIndices(s.tcti)).toEqual(before);
  });
});
