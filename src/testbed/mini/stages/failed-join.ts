/**
 * The failure after the node lock on a real VM (first boot of `mini lifecycle`'s reset step): the
 * node boots with its disk marked for reset and the SIMULATED kubeadm failing (guest config
 * `failKubeadm`: the bootstrapper runs `/bin/false` as kubeadm). The disk mapper wipes and formats
 * the disk, the node gets a join ticket and takes the node lock, kubeadm join fails three times, and
 * the production bootstrapper marks the disk for reset and asks for the reboot through its reboot
 * command (busybox `reboot -f`). QEMU runs with -no-reboot, so the VM ends; the host then reads the
 * disk's header with the production disk adapter and boots the VM again (the host's reboot).
 */
import { join } from 'node:path';
import { CryptsetupDisk } from '../../../adapters/disk/cryptsetup-disk.js';
import type { MiniCluster } from '../context.js';
import { type LifecycleStepResult, NODE_CMDLINE } from '../types.js';
import { bootstrapConfig } from './fleet.js';

/** The stopped node's state disk image through the production adapter (header copies in its folder). */
export function hostDisk(c: MiniCluster, name: string): CryptsetupDisk {
  return new CryptsetupDisk({
    devicePath: c.diskImage(name),
    headerCopyDir: c.nodeDir(name),
    initialPassphrasePath: join(c.nodeDir(name), 'initial-passphrase.bin'),
    timeoutInMs: 120_000,
  });
}

/** The stopped node's LUKS UUID (lower case) and whether its header says initialised. */
async function readHeader(c: MiniCluster, name: string): Promise<{ uuid: string; initialized?: boolean }> {
  const disk = hostDisk(c, name);
  const release = await disk.open();
  try {
    const token = await disk.readToken();
    return {
      uuid: (await disk.uuid()).toLowerCase(),
      ...(token === undefined ? {} : { initialized: token.diskIsInitialized }),
    };
  } finally {
    await release();
  }
}

/** Boots node `name` (stopped) with kubeadm failing and waits until the VM ended (see the module comment). */
export async function failedJoinBoot(
  c: MiniCluster,
  name: string,
): Promise<NonNullable<LifecycleStepResult['failedJoin']>> {
  c.t0 = Date.now();
  c.progress(`${name.padEnd(16)} boot with kubeadm failing (SIMULATED): a failure after the node lock`);
  const vm = await c.startNode(name, {
    cmdline: NODE_CMDLINE,
    config: { ...bootstrapConfig(c, c.node(name), false), stay: true, failKubeadm: true },
  });
  const code = await vm.waitForExit(c.remaining());
  if (code === undefined) throw new Error(`${name} did not end (reboot) within the step's deadline`);
  const reports = c.reports(name);
  const rebootRequested = reports.some((r) => r.type === 'reboot-requested');
  // The agent reports the bootstrapper's exit (and powers off after an error) only when no reboot came.
  const vmEndedItself = !reports.some((r) => ['bootstrapper-exit', 'error', 'done'].includes(String(r.type)));
  const header = await readHeader(c, name);
  c.progress(
    `${name.padEnd(16)} ${rebootRequested && vmEndedItself ? 'rebooted itself' : 'did NOT reboot itself'}; header ${header.initialized === false ? 'marked for reset' : 'NOT marked for reset'}`,
  );
  return { rebootRequested, vmEndedItself, headerReset: header.initialized === false, diskUuid: header.uuid };
}
