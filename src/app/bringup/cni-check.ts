/**
 * The bring-up's check for a pod network before it applies anything: the join and key service pods
 * use the pod network, so on a cluster without a CNI they never become Ready and the bring-up would
 * only wait out its timeout. A kubelet without a network plugin reports its Node NotReady with
 * "container runtime network not ready … cni plugin not initialized"; when no Node is Ready and one
 * says so, the check fails with one line naming what is missing. A cluster whose Nodes are not
 * registered yet passes (nothing to tell from).
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { ConfbootError, errorText } from '../../ports/errors.js';

const NO_NETWORK =
  /NetworkReady=false|NetworkPluginNotReady|cni plugin not initialized|network plugin is not ready/i;

/** Resolves when the cluster has a pod network or cannot tell; rejects `failed-precondition` naming the Node otherwise. */
export async function checkPodNetwork(kc: KubeConfig): Promise<void> {
  let nodes: Awaited<ReturnType<CoreV1Api['listNode']>>['items'];
  try {
    nodes = (await kc.makeApiClient(CoreV1Api).listNode({ limit: 100 })).items;
  } catch (err) {
    throw new ConfbootError('unavailable', `checking for a pod network (listing Nodes): ${errorText(err)}`, {
      cause: err,
    });
  }
  const ready = (n: (typeof nodes)[number]) => n.status?.conditions?.find((c) => c.type === 'Ready');
  if (nodes.some((n) => ready(n)?.status === 'True')) return;
  const blocked = nodes.find((n) => NO_NETWORK.test(ready(n)?.message ?? ''));
  if (blocked === undefined) return;
  throw new ConfbootError(
    'failed-precondition',
    `no pod network: node ${blocked.metadata?.name} is NotReady (${ready(blocked)?.message}); install a CNI (for example Cilium) first, then run confboot apply`,
  );
}
