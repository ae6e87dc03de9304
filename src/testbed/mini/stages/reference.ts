/**
 * Stage `reference boot` and the expected measurements: the firmware PCRs (0–3, 5–7) come from a
 * reference boot's event log, cached per firmware, QEMU version, device layout and acceleration;
 * the PCRs of the kernel, initrd and command line are computed from the image; PCR 15 must be zero.
 * Runs that miss the cache at the same time (the VM test files start together) boot once: the first
 * takes the entry's lock (vm/cache-lock.ts) and boots, the others wait and read its result.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { parseEventLog, type TcgEventLog } from '../../../adapters/attestation/eventlog/tcg-log.js';
import { type CacheLockOptions, withCacheLock } from '../../vm/cache-lock.js';
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
  const eventLog = await readEventLog(file);
  return {
    file,
    qemuVersion,
    cached: eventLog === undefined ? undefined : referencePcrs(decodeLog(eventLog)),
  };
}

async function readEventLog(file: string): Promise<string | undefined> {
  if (!existsSync(file)) return undefined;
  return (JSON.parse(await readFile(file, 'utf8')) as { eventLog: string }).eventLog;
}

/**
 * The reference boot's event log (base64) for `lookup.file`, booted by `boot` only when no other
 * run cached it meanwhile: under the entry's lock, the cache is read again first. A new log is
 * written to a temporary file renamed into place, so a reader never sees half of it.
 */
export async function sharedReferenceBoot(
  lookup: Pick<ReferenceLookup, 'file' | 'qemuVersion'>,
  boot: () => Promise<string>,
  options: Pick<CacheLockOptions, 'timeoutMs' | 'log'> = {},
): Promise<{ eventLog: string; booted: boolean }> {
  return withCacheLock(
    `${lookup.file}.lock`,
    async () => {
      const meanwhile = await readEventLog(lookup.file);
      if (meanwhile !== undefined) return { eventLog: meanwhile, booted: false };
      const eventLog = await boot();
      await mkdir(dirname(lookup.file), { recursive: true });
      const tmp = `${lookup.file}.tmp-${process.pid}`;
      await writeFile(tmp, JSON.stringify({ qemuVersion: lookup.qemuVersion, eventLog }));
      await rename(tmp, lookup.file);
      return { eventLog, booted: true };
    },
    options,
  );
}

/** Boots the reference VM when the cache had none, then sets the run's expected measurements. */
export async function referenceStage(c: MiniCluster, lookup: ReferenceLookup): Promise<void> {
  let reference = lookup.cached;
  let referenceSource = `reference boot cached in ${lookup.file}`;
  if (reference === undefined) {
    const shared = await sharedReferenceBoot(
      lookup,
      async () => {
        c.progress('reference boot: booting once to record the firmware event log (PCRs 0–3, 5–7)');
        const vm = await c.startNode(REFERENCE_VM, { cmdline: NODE_CMDLINE, config: undefined });
        const r = await vm.waitForReport(REPORT_PREFIX, (x) => x.type === 'measured', {
          timeoutMs: c.deadlineMs,
          ...c.signalOpt,
        });
        await vm.stop();
        if (typeof r.eventLog !== 'string') throw new Error('reference boot reported no event log');
        return r.eventLog;
      },
      { timeoutMs: c.deadlineMs, log: (line) => c.progress(`reference boot: ${line}`) },
    );
    reference = referencePcrs(decodeLog(shared.eventLog));
    referenceSource = shared.booted
      ? `reference boot just now, cached in ${lookup.file}`
      : `reference boot by another run meanwhile, cached in ${lookup.file}`;
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
