/**
 * Stage `network`: the private network in a new namespace (bridge, one tap per VM with a fixed
 * MAC/IP reservation, dnsmasq) and the metadata server on the bridge, which publishes each VM's
 * registered AK and EK certificate (written later by the fleet stage) and the init secret's hash.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { hashInitSecret } from '../../../adapters/crypto/bcrypt-secret-hash.js';
import { createPrivateNetwork } from '../../vm/private-network.js';
import { bundleEntry } from '../bundle.js';
import type { MiniCluster } from '../context.js';

/** Port of the metadata server on the bridge. */
export const METADATA_PORT = 8080;

/** Creates the network with a slot for every node and for each of `extraVms` (e.g. `reference`). */
export async function networkStage(c: MiniCluster, extraVms: readonly string[] = []): Promise<void> {
  const net = await createPrivateNetwork({ workDir: c.workDir });
  c.net = net;
  for (const name of [...extraVms, ...c.nodes.map((n) => n.name)]) c.slots.set(name, await net.addSlot(name));
  await net.startDhcp();
  c.metadataUrl = `http://${net.hostIp}:${METADATA_PORT}`;
  const metadataBundle = join(c.workDir, 'metadata-server.mjs');
  await writeFile(metadataBundle, await bundleEntry('host/metadata-entry'));
  c.identitiesFile = join(c.workDir, 'identities.json');
  await writeFile(c.identitiesFile, '{}');
  const server = net.spawnInside(
    process.execPath,
    [
      metadataBundle,
      '--leases',
      net.leasesFile,
      '--identities',
      c.identitiesFile,
      '--init-secret-hash',
      await hashInitSecret(c.initSecret),
      '--listen',
      `${net.hostIp}:${METADATA_PORT}`,
      ...(c.options.loadBalancer ? ['--load-balancer', net.hostIp] : []),
    ],
    join(c.workDir, 'metadata-server.log'),
  );
  c.track(server.pid, 'metadata server');
  c.progress(
    `private network ${net.netns}: bridge ${net.hostIp}/24, dnsmasq, metadata server on :${METADATA_PORT}`,
  );
}
