/**
 * The demo's Kubernetes side after `confboot init` (SIMULATED: no kube-apiserver, kubelet or
 * kube-controller-manager exists here), with the stricter stand-ins mini uses: the API server
 * (src/testbed/simulated/simulated-kube-api.ts) on the first control plane's address over HTTPS,
 * with a serving certificate and admin token issued from the cluster CA init made; kubeadm's
 * auto-approval binding as `kubeadm init` leaves it, deleted as confboot's kubeadm initializer
 * deletes it; the join service's bootstrap tokens and JoiningNodes through the real Kubernetes
 * adapters; every joining node's simulated `kubeadm join` doing the kubelet's TLS bootstrap through
 * the CSR API and waiting for its certificate; kube-controller-manager's signer; and the node
 * operator (src/domain/node-operator.ts on the real adapter) with a ServiceAccount token, every call
 * authorized against its RBAC (the objects the bring-up applies). It approves only the CSR of a join
 * ticket and deletes each JoiningNode once its Node is Ready.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { loadKubeConfig } from '../../adapters/kubernetes/api.js';
import {
  KubeBootstrapTokens,
  removeBootstrapTokenAutoApproval,
} from '../../adapters/kubernetes/bootstrap-tokens.js';
import { KubeClusterFacts } from '../../adapters/kubernetes/cluster-facts.js';
import { KubeNodeOperatorApi, nodeOperatorPorts } from '../../adapters/kubernetes/node-operator-api.js';
import { freePortOn } from '../../adapters/system/free-port.js';
import { NODE_OPERATOR, nodeOperatorObjects } from '../../app/manifests/node-operator.js';
import { NodeOperator } from '../../domain/node-operator.js';
import type { Clock } from '../../ports/clock.js';
import { messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import { issueApiServerCredentials, loadApiServerCredentials } from '../simulated/apiserver-credentials.js';
import { KubeletBootstrapJoiner } from '../simulated/kubelet-bootstrap.js';
import { kubeconfigAccess } from '../simulated/kubelet-volumes.js';
import {
  joiningNodeDeleters,
  type KubeletClientCert,
  kubeletClientCertOf,
  nodeRecordsReader,
} from '../simulated/node-records-state.js';
import { NODE_AUTOAPPROVE_BOOTSTRAP_BINDING } from '../simulated/route-request.js';
import { autoApproveBinding } from '../simulated/simulated-authn.js';
import { startControllerManager } from '../simulated/simulated-controller-manager.js';
import { FakeKubeApi } from '../simulated/simulated-kube-api.js';

/** What {@link startDemoClusterApi} needs. */
export interface DemoClusterApiOptions {
  /** The first control plane's PKI and admin.conf, as init left them. */
  pkiDir: string;
  adminConfPath: string;
  /** The first control plane's address: the API server listens there. */
  ip: string;
  /** Kubeconfigs go here; each node's kubelet.conf in `<workDir>/<node>`. */
  workDir: string;
  clock: Clock;
  logger: Logger;
}

/** The running Kubernetes side; `close()` stops the controllers and the server. */
export interface DemoClusterApi {
  /** `<ip>:<port>` of the API server, what join tickets name. */
  endpoint: string;
  api: FakeKubeApi;
  tokens: KubeBootstrapTokens;
  facts: KubeClusterFacts;
  /** Every joining node's simulated kubeadm join (the kubelet's TLS bootstrap). */
  joiner: KubeletBootstrapJoiner;
  /**
   * How each node's kubelet got its client certificate (`first`: the control plane init made), the
   * JoiningNodes the node operator deleted and those anyone else deleted.
   */
  kubeletCredentials(first: string): Promise<{
    certOf(name: string): KubeletClientCert;
    operatorDeleted: string[];
    hostDeleted: string[];
  }>;
  /** The bootstrap tokens the join service created (secret: for the demo's leak tests only). */
  bootstrapTokens(): string[];
  close(): Promise<void>;
}

/** Starts the Kubernetes side (see the module header). */
export async function startDemoClusterApi(o: DemoClusterApiOptions): Promise<DemoClusterApi> {
  // As kubeadm init: a serving certificate for the node's address and an admin token, once.
  if ((await loadApiServerCredentials(o.pkiDir, o.adminConfPath)) === undefined)
    await issueApiServerCredentials({ pkiDir: o.pkiDir, adminConfPath: o.adminConfPath, addresses: [o.ip] });
  const credentials = await loadApiServerCredentials(o.pkiDir, o.adminConfPath);
  if (credentials === undefined) throw new Error('init left no API server credentials');
  const port = await freePortOn(o.ip);
  const api = new FakeKubeApi({
    bearerToken: credentials.token,
    tls: credentials,
    clientCaPem: credentials.caPem,
  });
  api.seedComponents('k8s-components', []);
  api.clusterRoleBindings.set(NODE_AUTOAPPROVE_BOOTSTRAP_BINDING, autoApproveBinding());
  api.seedRbac(nodeOperatorObjects() as Array<Record<string, unknown>>);
  api.nodeRecords.cni = true;
  const server = `https://${o.ip}:${port}`;
  api.clusterInfoServer = server;
  await api.start(o.ip, port);
  const abort = new AbortController();
  let stopControllerManager = () => {};
  const close = async () => {
    abort.abort();
    stopControllerManager();
    await api.close();
  };
  try {
    const adminConf = withServer(await readFile(o.adminConfPath, 'utf8'), server);
    const adminPath = join(o.workDir, 'admin.conf');
    await writeFile(adminPath, adminConf, { mode: 0o600 });
    const admin = loadKubeConfig(adminPath);
    await removeBootstrapTokenAutoApproval(admin);
    stopControllerManager = startControllerManager(kubeconfigAccess(adminConf), o.pkiDir, () => {}, 200);
    const operatorPath = join(o.workDir, 'node-operator.conf');
    await writeFile(
      operatorPath,
      operatorKubeconfig(adminConf, api.serviceAccountToken('kube-system', NODE_OPERATOR)),
      {
        mode: 0o600,
      },
    );
    const operator = new NodeOperator({
      ...nodeOperatorPorts(new KubeNodeOperatorApi({ kubeConfig: loadKubeConfig(operatorPath) })),
      clock: o.clock,
      logger: o.logger.child({ component: 'node-operator' }),
    });
    const operatorLogger = o.logger.child({ component: 'node-operator' });
    void operator
      .run({
        intervalMs: 250,
        signal: abort.signal,
        onRound: (r) => {
          if (r.failures.length > 0)
            operatorLogger.warn('Node operator round failed in part', { failures: r.failures });
        },
      })
      .catch((err: unknown) => operatorLogger.error('Node operator stopped', { error: messageOf(err) }));
    const read = nodeRecordsReader(api);
    return {
      endpoint: `${o.ip}:${port}`,
      api,
      tokens: new KubeBootstrapTokens({
        kubeConfig: admin,
        clock: o.clock,
        caCertPath: join(o.pkiDir, 'ca.crt'),
      }),
      facts: new KubeClusterFacts({ kubeConfig: admin, clock: o.clock }),
      joiner: new KubeletBootstrapJoiner((name) => join(o.workDir, name)),
      async kubeletCredentials(first) {
        const records = await read.settled();
        return {
          certOf: (name) => kubeletClientCertOf(name === first, name, records.csrs),
          ...joiningNodeDeleters(records.joiningNodeDeletions),
        };
      },
      bootstrapTokens: () =>
        [...api.secrets.values()]
          .filter((s) => s.type === 'bootstrap.kubernetes.io/token')
          .map((s) => {
            const field = (k: string) => Buffer.from(String(s.data?.[k] ?? ''), 'base64').toString('utf8');
            return `${field('token-id')}.${field('token-secret')}`;
          }),
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** A kubeconfig's text with its first cluster's server replaced. */
function withServer(kubeconfig: string, server: string): string {
  const conf = parseYaml(kubeconfig);
  conf.clusters[0].cluster.server = server;
  return stringifyYaml(conf);
}

/** admin.conf with the ServiceAccount's token as its only user instead of the admin's. */
function operatorKubeconfig(adminConf: string, token: string): string {
  const conf = parseYaml(adminConf);
  conf.users = [{ name: NODE_OPERATOR, user: { token } }];
  conf.contexts[0].context.user = NODE_OPERATOR;
  return stringifyYaml(conf);
}
