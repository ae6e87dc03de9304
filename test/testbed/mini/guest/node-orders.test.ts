/**
 * The mini agent's host orders and re-attestation flags (src/testbed/mini/guest/node-orders.ts): a PCR
 * extended on a REAL software TPM (swtpm) through the production tpm2-tools adapter when the order
 * comes from the host's address, refused from any other address and for malformed orders; the
 * cluster ID kept from the bootstrapper's outcome line; the node operator's re-attestation flags
 * once the join service's files and the cluster ID exist, and a bounded wait otherwise.
 */

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import {
  keepClusterId,
  reattestationArgs,
  serveOrders,
} from '../../../../src/testbed/mini/guest/node-orders.js';
import { useSwtpm } from '../../../support/swtpm.js';

const ID = 'ab'.repeat(32);

describe('mini node orders', () => {
  const swtpm = useSwtpm();
  const servers: Server[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });
  const tempDir = async () => {
    const d = await mkdtemp(join(tmpdir(), 'node-orders-'));
    dirs.push(d);
    return d;
  };
  const start = async (host: string, tcti: string, reports: Record<string, unknown>[]) => {
    const server = await serveOrders(host, (r) => reports.push(r), { tcti, port: 0, listen: '127.0.0.1' });
    servers.push(server);
    const address = server.address();
    if (typeof address !== 'object' || address === null) throw new Error('not listening');
    return (path: string, body: unknown) =>
      fetch(`http://127.0.0.1:${address.port}${path}`, {
        method: 'POST',
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(60_000),
      });
  };

  it('extends the ordered PCR on the TPM for the host and reports it', async () => {
    const tpm = await swtpm();
    const reports: Record<string, unknown>[] = [];
    const post = await start('127.0.0.1', tpm.tcti, reports);
    const res = await post('/extend-pcr', { pcr: 9, data: '01'.repeat(32) });
    expect(res.status).toBe(200);
    const done = (await res.json()) as { pcr: number; before: string; after: string };
    expect(done.pcr).toBe(9);
    expect(done.before).toBe('00'.repeat(32));
    expect(done.after).not.toBe(done.before);
    // The TPM itself holds the new value.
    const now = (await new Tpm2ToolsTpm({ tcti: tpm.tcti }).readPcrs([9])).get(9);
    expect(Buffer.from(now ?? []).toString('hex')).toBe(done.after);
    expect(reports).toContainEqual({ type: 'pcr-extended', ...done });
  }, 120_000);

  it('refuses other addresses, other paths and malformed orders without touching the TPM', async () => {
    const tpm = await swtpm();
    const reports: Record<string, unknown>[] = [];
    const foreign = await start('10.0.0.1', tpm.tcti, reports);
    expect((await foreign('/extend-pcr', { pcr: 9, data: '01' })).status).toBe(403);
    const post = await start('127.0.0.1', tpm.tcti, reports);
    expect((await post('/other', { pcr: 9, data: '01' })).status).toBe(404);
    for (const bad of [{ pcr: 16, data: '01' }, { pcr: 9, data: 'xyz' }, { pcr: 9 }, { pcr: -1, data: '01' }])
      expect((await post('/extend-pcr', bad)).status).toBe(400);
    expect(reports.filter((r) => r.type === 'pcr-extended')).toEqual([]);
    const pcr9 = (await new Tpm2ToolsTpm({ tcti: tpm.tcti }).readPcrs([9])).get(9);
    expect(Buffer.from(pcr9 ?? []).toString('hex')).toBe('00'.repeat(32));
  }, 120_000);

  it('keeps the cluster ID of an outcome line that names one', async () => {
    const file = join(await tempDir(), 'sub', 'cluster-id');
    await keepClusterId('Node rejoined: state disk open, PCR 15 marked again', file);
    await expect(reattestationArgs(await tempDir(), file, 300)).rejects.toThrow(/within 300 ms/);
    await keepClusterId(`Node initialised the cluster (cluster ID ${ID})`, file);
    const run = await tempDir();
    await writeFile(join(run, 'attestationConfig.json'), '{}');
    await writeFile(join(run, 'ak-registry.json'), '{}');
    const args = await reattestationArgs(run, file, 5000);
    expect(args).toEqual(
      expect.arrayContaining([
        '--variant=qemu-vtpm',
        `--attestation-config=${run}/attestationConfig.json`,
        `--qemu-ak-registry=${run}/ak-registry.json`,
        `--cluster-id=${ID}`,
        '--reattest-interval=5s',
        '--reattest-cordon',
      ]),
    );
  });
});
