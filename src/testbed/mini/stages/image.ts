/**
 * Stage `image`: builds (or takes from the cache) the node image and picks the acceleration: KVM
 * when a probe boot of the image works here, else TCG. Sets the run's node deadline from it.
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { QemuVm } from '../../vm/qemu-vm.js';
import type { MiniCluster } from '../context.js';
import { REPORT_PREFIX } from '../guest/protocol.js';
import { buildNodeImage, type NodeImage } from '../image.js';
import { NODE_CMDLINE } from '../types.js';

/** True when KVM boots a guest here (a probe boot of the image, 45 s at most). */
async function kvmWorks(image: NodeImage, dir: string, signal?: AbortSignal): Promise<boolean> {
  if (!existsSync('/dev/kvm')) return false;
  await mkdir(join(dir, 'tpm'), { recursive: true });
  const vm = new QemuVm({
    name: 'kvm-probe',
    workDir: dir,
    tpmStateDir: join(dir, 'tpm'),
    kernel: image.kernel,
    initrd: image.initrd,
    cmdline: NODE_CMDLINE,
    memoryMiB: 1024,
    accel: 'kvm',
  });
  try {
    await vm.start();
    await vm.waitForReport(REPORT_PREFIX, (r) => r.type === 'measured', {
      timeoutMs: 45_000,
      ...(signal ? { signal } : {}),
    });
    return true;
  } catch {
    return false;
  } finally {
    await vm.stop();
  }
}

/** Builds the image and chooses KVM or TCG. */
export async function imageStage(c: MiniCluster): Promise<void> {
  const { progress, options } = c;
  progress(
    'building the node image (Debian kernel; initramfs with busybox, node, tpm2-tools, cryptsetup, the confboot CLI)',
  );
  c.image = await buildNodeImage({ cacheDir: c.cacheDir, log: progress });
  progress(
    `node image ${c.image.key.slice(0, 12)}: ${c.image.kernelPackage}, initrd sha256 ${c.image.initrdSha256.slice(0, 16)}…`,
  );
  c.accel = options.accel === 'auto' ? 'tcg' : options.accel;
  if (options.accel === 'auto') {
    progress('probing KVM by booting the image (45 s at most)');
    c.accel = (await kvmWorks(c.image, join(c.workDir, 'kvm-probe'), options.signal)) ? 'kvm' : 'tcg';
    progress(`acceleration: ${c.accel}${c.accel === 'tcg' ? ' (KVM does not run guests here)' : ''}`);
  }
  c.deadlineMs = options.nodeTimeoutMs ?? (c.accel === 'kvm' ? 300_000 : 900_000);
}
