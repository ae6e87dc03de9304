/**
 * Stage `reference boot` and the expected measurements: the firmware PCRs (0–3, 5–7) come from a
 * reference boot's event log, cached per firmware, QEMU version, device layout and acceleration;
 * the PCRs of the kernel, initrd and command line are computed from the image; PCR 15 must be zero.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseEventLog, type TcgEventLog } from '../../../adapters/attestation/eventlog/tcg-log.js';
import { OVMF_CODE, OVMF_VARS } from '../../vm/qemu-vm.js';
import { run } from '../../vm/run.js';
import type { MiniCluster } from '../context.js';
import { REPORT_PREFIX } from '../guest/protocol.js';
import { computedPcrs, referencePcrs } from '../measurements.js';
import { NODE_CMDLINE } from '../types.js';

/** Name of the reference VM's network slot. */
export const REFERENCE_VM = 'reference';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** The firmware event log a VM reported (base64), parsed. */
export function decodeLog(b64: unknown): TcgEventLog {
  if (typeof b64 !== 'string') throw new Error('report without an event log');
  return parseEventLog(Buffer.from(b64, 'base64'));
}

/** A cached reference boot, or where to cache one. */
export interface ReferenceLookup {
  file: string;
  qemuVersion: string;
  cached: Map<number, Buffer> | undefined;
}

/** Looks the reference boot up in the cache (before the network: a missing one needs a slot). */
export async function findReference(c: MiniCluster): Promise<ReferenceLookup> {
  const qemuVersion = (await run('qemu-system-x86_64', ['--version'])).stdout.split('\n')[0] ?? '';
  const key = createHash('sha256')
    .update(await readFile(OVMF_CODE))
    .update(await readFile(OVMF_VARS))
    .update(
      `${qemuVersion}\0pc,${c.memoryMiB},tpm-tis,virtio-net,virtio-blk,2 serial,fw_cfg config\0${c.accel}`,
    )
    .digest('hex');
  const file = join(c.cacheDir, 'reference', `${key.slice(0, 24)}.json`);
  if (!existsSync(file)) return { file, qemuVersion, cached: undefined };
  const saved = JSON.parse(await readFile(file, 'utf8')) as { eventLog: string };
  return { file, qemuVersion, cached: referencePcrs(decodeLog(saved.eventLog)) };
}

/** Boots the reference VM when the cache had none, then sets the run's expected measurements. */
export async function referenceStage(c: MiniCluster, lookup: ReferenceLookup): Promise<void> {
  let reference = lookup.cached;
  let referenceSource = `reference boot cached in ${lookup.file}`;
  if (reference === undefined) {
    c.progress('reference boot: booting once to record the firmware event log (PCRs 0–3, 5–7)');
    const vm = await c.startNode(REFERENCE_VM, { cmdline: NODE_CMDLINE, config: undefined });
    const r = await vm.waitForReport(REPORT_PREFIX, (x) => x.type === 'measured', {
      timeoutMs: c.deadlineMs,
      ...c.signalOpt,
    });
    await vm.stop();
    reference = referencePcrs(decodeLog(r.eventLog));
    await mkdir(join(c.cacheDir, 'reference'), { recursive: true });
    await writeFile(lookup.file, JSON.stringify({ qemuVersion: lookup.qemuVersion, eventLog: r.eventLog }));
    referenceSource = `reference boot just now, cached in ${lookup.file}`;
  }
  const computed = await computedPcrs(c.image.kernel, c.image.initrd, NODE_CMDLINE, c.memoryMiB);
  // PCR 15 (the node lock) must still be zero: a node that already joined a cluster is refused.
  const expected = new Map<number, Buffer>([...reference, ...computed, [15, Buffer.alloc(32)]]);
  const attestationConfig = {
    measurements: Object.fromEntries(
      [...expected].map(([i, v]) => [String(i), { expected: hex(v), warnOnly: false }]),
    ),
  };
  await writeFile(join(c.workDir, 'attestationConfig.json'), JSON.stringify(attestationConfig, null, 2));
  c.measurements = { reference, referenceSource, computed, expected, attestationConfig };
}
