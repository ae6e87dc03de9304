/**
 * The SIMULATED kube-controller-manager's certificate controllers, as an API client on a control
 * plane (it holds the cluster CA key there, as the real one does): `csrapproving` approves a
 * kubelet client CSR made with a bootstrap token only while kubeadm's
 * `kubeadm:node-autoapprove-bootstrap` binding exists (the real approver's SubjectAccessReview for
 * `certificatesigningrequests/nodeclient` succeeds only through it), and `csrsigning` signs only
 * approved CSRs of the kubelet client signer with the cluster CA (subject as requested, client
 * auth, one year) and writes `status.certificate`. Denied CSRs are never signed.
 */
import { readCsrRequest } from '../../adapters/kubernetes/csr-request.js';
import { loadX509 } from '../../adapters/pki/x509-loader.js';
import { KUBELET_CLIENT_SIGNER } from '../../ports/kubelet-csrs.js';
import { apiCall, apiExpect } from './api-client.js';
import { issueFromClusterCa } from './apiserver-credentials.js';
import type { KubeconfigAccess } from './kubelet-volumes.js';
import { NODE_AUTOAPPROVE_BOOTSTRAP_BINDING } from './route-request.js';

const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

/** What one round did. */
export interface ControllerManagerRound {
  autoApproved: string[];
  signed: Array<{ csr: string; subject: string }>;
}

/** One round of both controllers with `access` (an admin's) and the CA in `pkiDir`. */
export async function controllerManagerRound(
  access: KubeconfigAccess,
  pkiDir: string,
): Promise<ControllerManagerRound> {
  const round: ControllerManagerRound = { autoApproved: [], signed: [] };
  const list = await apiExpect(
    access,
    'GET',
    `${CSR_PATH}?fieldSelector=${encodeURIComponent(`spec.signerName=${KUBELET_CLIENT_SIGNER}`)}`,
  );
  const binding = await apiCall(
    access,
    'GET',
    `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${NODE_AUTOAPPROVE_BOOTSTRAP_BINDING}`,
  );
  for (const csr of list.body?.items ?? []) {
    const name = String(csr.metadata.name);
    const conditions: Array<Record<string, string>> = csr.status?.conditions ?? [];
    const decided = conditions.some((c) => c.type === 'Approved' || c.type === 'Denied');
    if (!decided && binding.status === 200 && String(csr.spec.username).startsWith('system:bootstrap:')) {
      const now = new Date().toISOString();
      await apiExpect(access, 'PUT', `${CSR_PATH}/${name}/approval`, {
        body: {
          ...csr,
          status: {
            ...csr.status,
            conditions: [
              ...conditions,
              {
                type: 'Approved',
                status: 'True',
                reason: 'AutoApproved',
                message: 'Auto approving kubelet client certificate after SubjectAccessReview.',
                lastUpdateTime: now,
              },
            ],
          },
        },
      });
      round.autoApproved.push(name);
      conditions.push({ type: 'Approved' });
    }
    const approved =
      conditions.some((c) => c.type === 'Approved') && !conditions.some((c) => c.type === 'Denied');
    if (!approved || csr.status?.certificate) continue;
    const pem = Buffer.from(csr.spec.request, 'base64').toString('utf8');
    const facts = await readCsrRequest(pem);
    const x509 = await loadX509();
    const publicKeyPem = new x509.Pkcs10CertificateRequest(pem).publicKey.toString('pem');
    const subject = [
      ...facts.organizations.map((o) => `O=${o}`),
      ...facts.commonNames.map((c) => `CN=${c}`),
    ].join(', ');
    const leaf = await issueFromClusterCa(
      pkiDir,
      new Date(),
      subject,
      (m) => [new m.ExtendedKeyUsageExtension([m.ExtendedKeyUsage.clientAuth])],
      publicKeyPem,
    );
    await apiExpect(access, 'PUT', `${CSR_PATH}/${name}/status`, {
      body: { ...csr, status: { ...csr.status, certificate: Buffer.from(leaf.certPem).toString('base64') } },
    });
    round.signed.push({ csr: name, subject });
  }
  return round;
}

/**
 * Runs {@link controllerManagerRound} every `intervalMs` until the returned function is called;
 * `onRound` sees every round that approved or signed something. A failed round is tried again.
 */
export function startControllerManager(
  access: KubeconfigAccess,
  pkiDir: string,
  onRound: (round: ControllerManagerRound) => void,
  intervalMs = 2000,
): () => void {
  let running = true;
  void (async () => {
    while (running) {
      try {
        const round = await controllerManagerRound(access, pkiDir);
        if (round.signed.length > 0 || round.autoApproved.length > 0) onRound(round);
      } catch {}
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  })();
  return () => {
    running = false;
  };
}
