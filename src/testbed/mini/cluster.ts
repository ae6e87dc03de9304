/**
 * `confboot mini up` orchestration: real QEMU VMs (OVMF measured boot into a per-VM swtpm, the
 * node image from image.ts) on a private network in a namespace with dnsmasq and the metadata
 * server, running confboot's real flow:
 *
 * - every VM maps its LUKS2 state disk (disk-mapper) and runs the production
 *   `confboot bootstrapper --csp qemu --attestation-variant qemu-vtpm` (TCTI device:/dev/tpmrm0);
 * - the host runs `confboot init`'s code path inside the namespace against the control-plane VM:
 *   it verifies that VM's quote (expected measurements computed from the image and a reference
 *   boot, and the AK the host registered for the VM) before sending the master secret, then
 *   creates the master-secret Secret through the SIMULATED Kubernetes API server with the admin
 *   kubeconfig init returned (HTTPS verified against its cluster CA, its random admin token), and
 *   refuses unless its own creation won and reads back equal;
 * - the control-plane VM then runs the production `confboot key-service` and
 *   `confboot join-service` (qemu-vtpm, the same expected measurements, `--qemu-ak-registry`);
 *   workers find it through the metadata server and join on <control-plane IP>:30090; a tampered
 *   VM (another kernel command line, so PCR 9 differs) is refused by the join service;
 * - at the end every VM's outcome is checked from real state: the dm-crypt mapping and keyslots as
 *   the VM reports them, PCR 15 read from its TPM against SHA256(0^32 || SHA256(cluster ID)), and,
 *   after the VM stopped, the disk image on the host: the initial passphrase no longer opens it,
 *   the key derived (HKDF, the key service's derivation) for its UUID does.
 *
 * The run is a list of named stages (stages/*.ts) over one {@link MiniCluster}: image, network,
 * reference boot, provision, boot, init (with the control plane's boot evidence), join (each
 * worker's boot evidence and outcome), services, outcome; other scenarios (`mini lifecycle`) reuse
 * them with steps of their own. kubeadm and the Kubernetes API server are SIMULATED
 * (guest/kubeadm-sim.ts, src/testbed/simulated/simulated-kube-api.ts); the result says so.
 */
import { MiniCluster } from './context.js';
import { type BootExtras, bootStage, provisionStage } from './stages/fleet.js';
import { imageStage } from './stages/image.js';
import { initStage, type MiniSecrets } from './stages/init.js';
import { servicesStage, withKubeletCredentials, workerStage } from './stages/join.js';
import { networkStage } from './stages/network.js';
import { apiServerReport, buildResult, collectOutcome, statusSnapshot } from './stages/outcome.js';
import { findReference, REFERENCE_VM, referenceStage } from './stages/reference.js';
import { type MiniResult, type MiniUpOptions, planNodes } from './types.js';

/**
 * Runs the shared start of a scenario: image, network, reference boot, TPM provisioning. The
 * caller boots the nodes (bootStage) and must call `teardown` on the returned cluster.
 */
export async function prepareCluster(c: MiniCluster): Promise<void> {
  await imageStage(c);
  const reference = await findReference(c);
  await networkStage(c, reference.cached === undefined ? [REFERENCE_VM] : []);
  await referenceStage(c, reference);
  await provisionStage(c);
}

/**
 * Boots the fleet (each node's boot order with `extras`), runs the operator's init against the
 * control plane and waits for every worker's outcome and the control plane's services; workers
 * that `stay` keep running. Resolves to init's outcome and the operator's secrets.
 */
export async function formCluster(
  c: MiniCluster,
  extras?: BootExtras,
  stay = false,
): Promise<{ init: MiniResult['init']; secrets: MiniSecrets | undefined }> {
  await bootStage(c, extras);
  const workersDone = Promise.all(c.nodes.slice(1).map((n) => workerStage(c, n, stay)));
  const formed = await initStage(c);
  if (formed.secrets !== undefined) await servicesStage(c);
  await workersDone;
  return formed;
}

/**
 * Gives the control plane time to report the simulated API server's final state: at least 3 s, and
 * until it reports no JoiningNode left (the node operator deletes each in its first round after the
 * node's Node is Ready; it runs every 10 s), at most `boundMs`. What is left then is in the result.
 */
async function joiningNodesSettled(c: MiniCluster, boundMs = 30_000): Promise<void> {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const deadline = Date.now() + boundMs;
  await sleep(3000);
  while (Date.now() < deadline) {
    if (apiServerReport(c)?.joiningNodes.length === 0) return;
    await sleep(1000);
  }
}

/** Runs the cluster; always cleans up VMs, swtpms, dnsmasq and the namespace unless `keep`. */
export async function miniUp(options: MiniUpOptions): Promise<MiniResult> {
  const c = await MiniCluster.open(options, planNodes(options.workers, options.tampered));
  let result: MiniResult | undefined;
  try {
    await prepareCluster(c);
    const { init, secrets } = await formCluster(c);
    await joiningNodesSettled(c);
    const status = init?.ok ? await statusSnapshot(c) : undefined;
    // Stop every VM (with --keep all but the control plane, which keeps serving joins), then
    // check each disk image on the host.
    await c.stopAll(options.keep ? c.controlPlane.name : undefined);
    await collectOutcome(c, secrets);
    // Each kubelet's client certificate and the JoiningNode deletions, from the API server's records.
    result = withKubeletCredentials(c, buildResult(c, init));
    if (status !== undefined) result.status = status;
  } finally {
    const leftovers = await c.teardown(options.keep === true);
    if (result !== undefined && !options.keep) {
      result.leftovers = leftovers;
      if (leftovers.length > 0) result.ok = false;
    }
  }
  return result;
}
