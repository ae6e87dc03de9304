/**
 * What the host concludes after the boot with kubeadm failing (failed-join.ts), on a real LUKS2
 * image read through the production disk adapter, with a stand-in for the cluster and its VM (no
 * QEMU here): the boot order carries `failKubeadm`; a VM that asked for the reboot and ended without
 * its bootstrapper exiting, over a header marked for reset, holds; one whose bootstrapper exited, or
 * whose header is not marked, does not; a VM that never ends is an error.
 */
import { describe, expect, it } from 'vitest';
import { CryptsetupDisk } from '../../../../src/adapters/disk/cryptsetup-disk.js';
import type { MiniCluster } from '../../../../src/testbed/mini/context.js';
import type { BootstrapConfig } from '../../../../src/testbed/mini/guest/protocol.js';
import { failedJoinBoot, hostDisk } from '../../../../src/testbed/mini/stages/failed-join.js';
import { dumpMetadata, formatImage } from '../../../adapters/disk/luks-image.js';
import { useTmpDirs } from '../../../support/tmp.js';

const tmp = useTmpDirs('confboot-failed-join-');

/** A stand-in cluster whose worker-1 boots into a VM that ends with `exit` after `reports`. */
function stubCluster(
  dir: string,
  image: string,
  reports: Record<string, unknown>[],
  exit: number | undefined,
) {
  const boots: BootstrapConfig[] = [];
  const c = {
    t0: 0,
    progress: () => {},
    metadataUrl: 'http://10.42.0.1:8080',
    node: (name: string) => ({ name, role: 'worker' }),
    remaining: () => 60_000,
    startNode: async (_name: string, boot: { config: BootstrapConfig }) => {
      boots.push(boot.config);
      return { waitForExit: async () => exit };
    },
    reports: () => reports,
    diskImage: () => image,
    nodeDir: () => dir,
  } as unknown as MiniCluster;
  return { c, boots };
}

async function imageMarkedForReset(dir: string, marked: boolean): Promise<{ path: string; uuid: string }> {
  const image = await formatImage(dir);
  const disk = new CryptsetupDisk({
    devicePath: image.path,
    headerCopyDir: dir,
    initialPassphrasePath: image.keyFile,
  });
  const release = await disk.open();
  try {
    if (marked) await disk.markDiskForReset();
    return { path: image.path, uuid: (await disk.uuid()).toLowerCase() };
  } finally {
    await release();
  }
}

describe('failedJoinBoot', () => {
  it('a VM that asked for the reboot and ended by itself over a header marked for reset holds', async () => {
    const dir = tmp();
    const image = await imageMarkedForReset(dir, true);
    const { c, boots } = stubCluster(dir, image.path, [{ type: 'started' }, { type: 'reboot-requested' }], 0);
    expect(await failedJoinBoot(c, 'worker-1')).toEqual({
      rebootRequested: true,
      vmEndedItself: true,
      headerReset: true,
      diskUuid: image.uuid,
    });
    expect(boots).toEqual([expect.objectContaining({ step: 'bootstrap', failKubeadm: true, stay: true })]);
  });

  it('a bootstrapper that exited instead, over a header not marked, does not', async () => {
    const dir = tmp();
    const image = await imageMarkedForReset(dir, false);
    const reports = [
      { type: 'bootstrapper-exit', code: 1 },
      { type: 'error', message: 'exited with 1' },
    ];
    const { c } = stubCluster(dir, image.path, reports, 0);
    expect(await failedJoinBoot(c, 'worker-1')).toMatchObject({
      rebootRequested: false,
      vmEndedItself: false,
      headerReset: false,
    });
  });

  it('a VM that does not end within the deadline is an error', async () => {
    const dir = tmp();
    const image = await imageMarkedForReset(dir, true);
    const { c } = stubCluster(dir, image.path, [], undefined);
    await expect(failedJoinBoot(c, 'worker-1')).rejects.toThrow(
      /did not end \(reboot\) within the step's deadline/,
    );
  });

  it('hostDisk reads the stopped node image through the production adapter', async () => {
    const dir = tmp();
    const image = await imageMarkedForReset(dir, true);
    const { c } = stubCluster(dir, image.path, [], 0);
    const disk = hostDisk(c, 'worker-1');
    const release = await disk.open();
    try {
      expect((await disk.readToken())?.diskIsInitialized).toBe(false);
    } finally {
      await release();
    }
    const meta = (await dumpMetadata(image.path)) as {
      tokens: Record<string, { diskIsInitialized?: boolean }>;
    };
    expect(meta.tokens['0']?.diskIsInitialized).toBe(false);
  });
});
