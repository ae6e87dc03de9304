/**
 * What mini's simulated `kubeadm init` leaves on a control plane, for tests of the simulated API
 * server: the cluster CA and PKI in `<dir>/pki`, admin.conf, and the API server's serving
 * certificate with a random admin token (for a key the control plane makes, or for `publicKeyPem`).
 */
import { join } from 'node:path';
import { silentLogger } from '../../src/adapters/log/pino-logger.js';
import { SystemClock } from '../../src/adapters/system/system-clock.js';
import { issueApiServerCredentials } from '../../src/testbed/simulated/apiserver-credentials.js';
import {
  SimulatedClusterInitializer,
  SimulatedControlPlane,
} from '../../src/testbed/simulated/simulated-kubernetes.js';

/** Runs the simulated init in `dir`; admin.conf names `controlPlaneEndpoint` (default the node at 127.0.0.1). */
export async function simulatedInit(
  dir: string,
  options: { controlPlaneEndpoint?: string; publicKeyPem?: string } = {},
): Promise<{ dir: string; pkiDir: string; adminConfPath: string }> {
  const pkiDir = join(dir, 'pki');
  const adminConfPath = join(dir, 'admin.conf');
  await new SimulatedClusterInitializer(new SimulatedControlPlane(new SystemClock()), {
    pkiDir,
    adminConfPath,
    logger: silentLogger,
  }).initCluster({
    kubernetesVersion: 'v1.31.1',
    clusterName: 'confboot-mini',
    conformanceMode: false,
    components: [],
    apiserverCertSans: [],
    serviceCidr: '10.96.0.0/12',
    nodeName: 'control-plane-0',
    nodeIp: '127.0.0.1',
    ...(options.controlPlaneEndpoint ? { controlPlaneEndpoint: options.controlPlaneEndpoint } : {}),
  });
  await issueApiServerCredentials({
    pkiDir,
    adminConfPath,
    addresses: ['127.0.0.1'],
    ...(options.publicKeyPem ? { publicKeyPem: options.publicKeyPem } : {}),
  });
  return { dir, pkiDir, adminConfPath };
}
