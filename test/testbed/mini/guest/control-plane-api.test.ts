/**
 * The one-control-plane mini API server and what runs beside it (control-plane-api.ts), on
 * loopback over real HTTPS with the real cluster CA of the simulated kubeadm init (SIMULATED API
 * server; the node operator's program is recorded, not started, and its round is run in-process
 * with the kubeconfig the server handed it).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../../src/adapters/kubernetes/api.js';
import { removeBootstrapTokenAutoApproval } from '../../../../src/adapters/kubernetes/bootstrap-tokens.js';
import { silentLogger } from '../../../../src/adapters/log/pino-logger.js';
import { freePortOn } from '../../../../src/adapters/system/free-port.js';
import { runNodeOperator } from '../../../../src/app/node-operator/run.js';
import {
  type ControlPlaneApi,
  startControlPlaneApi,
} from '../../../../src/testbed/mini/guest/control-plane-api.js';
import { apiCall } from '../../../../src/testbed/simulated/api-client.js';
import { loadApiServerCredentials } from '../../../../src/testbed/simulated/apiserver-credentials.js';
import { kubeconfigAccess } from '../../../../src/testbed/simulated/kubelet-volumes.js';
import { NODE_AUTOAPPROVE_BOOTSTRAP_BINDING } from '../../../../src/testbed/simulated/route-request.js';
import { MASTER_SECRET_NAME } from '../../../../src/testbed/simulated/simulated-kube-api.js';
import { simulatedInit } from '../../../support/simulated-init.js';
import { useTmpDirs } from '../../../support/tmp.js';

const tmp = useTmpDirs('confboot-cp-api-');
const started: ControlPlaneApi[] = [];
afterEach(async () => {
  for (const s of started.splice(0)) await s.stop();
});

async function start(restored: boolean) {
  const dir = tmp();
  const init = await simulatedInit(dir);
  const credentials = await loadApiServerCredentials(init.pkiDir, init.adminConfPath);
  if (credentials === undefined) throw new Error('no credentials');
  const port = await freePortOn('127.0.0.1');
  const adminConfPath = join(dir, 'admin-local.conf');
  await writeFile(
    adminConfPath,
    (await readFile(init.adminConfPath, 'utf8')).replace(
      'https://127.0.0.1:6443',
      `https://127.0.0.1:${port}`,
    ),
  );
  const programs: string[][] = [];
  const reports: Array<Record<string, unknown>> = [];
  const operatorKubeconfigPath = join(dir, 'node-operator.conf');
  const cp = await startControlPlaneApi({
    credentials,
    ip: '127.0.0.1',
    port,
    host: '127.0.0.1',
    restore: async (api) => {
      if (restored) api.secrets.set(MASTER_SECRET_NAME, { metadata: { name: MASTER_SECRET_NAME }, data: {} });
      return restored;
    },
    report: (r) => reports.push(r),
    program: (_source, args) => {
      programs.push(args);
      return { exit: new Promise(() => {}) };
    },
    adminConfPath,
    operatorKubeconfigPath,
  });
  started.push(cp);
  const waitFor = async (what: string, check: () => boolean) => {
    for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 50));
    if (!check()) throw new Error(`no ${what} within 10 s`);
  };
  return { cp, programs, reports, adminConfPath, operatorKubeconfigPath, waitFor, pkiDir: init.pkiDir };
}

describe('startControlPlaneApi (SIMULATED API server; real HTTPS, real client-node)', () => {
  it("a new cluster: kubeadm's binding until init deletes it, the controllers only once the master secret exists, then the node operator's round passes with the bring-up's RBAC and nothing more", async () => {
    const s = await start(false);
    expect(s.cp.restored).toBe(false);
    expect(s.cp.api.clusterRoleBindings.has(NODE_AUTOAPPROVE_BOOTSTRAP_BINDING)).toBe(true);
    expect(await removeBootstrapTokenAutoApproval(loadKubeConfig(s.adminConfPath))).toBe('removed');
    await s.waitFor('node-records report', () => s.reports.some((r) => r.type === 'node-records'));
    // Init is not done: neither the controller-manager nor the node operator runs yet.
    expect(s.programs).toEqual([]);
    s.cp.api.secrets.set(MASTER_SECRET_NAME, { metadata: { name: MASTER_SECRET_NAME }, data: {} });
    await s.waitFor('node operator', () => s.programs.length > 0);
    expect(s.programs).toEqual([
      ['node-operator', `--kubeconfig=${s.operatorKubeconfigPath}`, '--interval=10s'],
    ]);
    const round = await runNodeOperator({
      kubeconfigPath: s.operatorKubeconfigPath,
      once: true,
      signal: new AbortController().signal,
      logger: silentLogger,
    });
    expect(round?.failures).toEqual([]);
    const operator = kubeconfigAccess(await readFile(s.operatorKubeconfigPath, 'utf8'));
    expect((await apiCall(operator, 'GET', '/api/v1/namespaces/kube-system/secrets')).status).toBe(403);
    expect(s.cp.api.forbidden).toEqual([
      'User "system:serviceaccount:kube-system:node-operator" cannot list secrets in namespace kube-system',
    ]);
    expect(s.cp.api.violations).toEqual([]);
  });

  it('a cluster restored from the state disk gets no auto-approval binding back, and its controllers start at once', async () => {
    const s = await start(true);
    expect(s.cp.restored).toBe(true);
    expect(s.cp.api.clusterRoleBindings.has(NODE_AUTOAPPROVE_BOOTSTRAP_BINDING)).toBe(false);
    await s.waitFor('node operator', () => s.programs.length > 0);
    expect(s.programs[0]?.[0]).toBe('node-operator');
  });
});
