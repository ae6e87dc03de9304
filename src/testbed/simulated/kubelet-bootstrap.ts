/**
 * A SIMULATED kubelet's TLS bootstrap and registration, as the kubelet documents them, for nodes
 * where no kubelet runs: with the bootstrap kubeconfig (API server, cluster CA, bootstrap token) it
 * creates a CertificateSigningRequest for `O=system:nodes, CN=system:node:<name>` with signer
 * `kubernetes.io/kube-apiserver-client-kubelet` — from the key it finds (the kubelet reuses
 * `kubelet-client.key.tmp`; a confboot node puts its join ticket's kubelet key there) —, waits for
 * the certificate (bounded; a Denied condition ends the wait with its reason), writes kubelet.conf
 * with the certificate and key, then, as `system:node:<name>`, registers its Node and reports it
 * Ready (the API server shows NotReady while no CNI is installed). Nothing is logged; the key
 * stays in the files it came from and in kubelet.conf. {@link kubeletJoin} adds kubeadm's token
 * discovery before it, and {@link KubeletBootstrapJoiner} is an in-process simulated `kubeadm join`
 * doing both (mini's VMs run kubeadm-sim.ts, which calls kubeletJoin).
 */
import { createHash, createPrivateKey, createPublicKey, webcrypto, X509Certificate } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { join } from 'node:path';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { loadX509 } from '../../adapters/pki/x509-loader.js';
import type { ClusterJoiner, JoinClusterArgs } from '../../ports/cluster-joiner.js';
import { ConfbootError } from '../../ports/errors.js';
import { KUBELET_CLIENT_SIGNER } from '../../ports/kubelet-csrs.js';
import { apiCall, apiExpect } from './api-client.js';
import { kubeletCertificateProblems } from './kubelet-certificate-check.js';
import type { KubeconfigAccess } from './kubelet-volumes.js';
import { CLUSTER_INFO_PATH } from './route-request.js';

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const CSR_PATH = '/apis/certificates.k8s.io/v1/certificatesigningrequests';

/** A PEM CERTIFICATE REQUEST for `nodeName` signed with `keyPem` (ECDSA P-256, SEC1 or PKCS#8). */
export async function kubeletCsrPem(nodeName: string, keyPem: string): Promise<string> {
  const x509 = await loadX509();
  const der = (
    k: ReturnType<typeof createPrivateKey> | ReturnType<typeof createPublicKey>,
    type: 'pkcs8' | 'spki',
  ) => k.export({ type, format: 'der' } as never) as Buffer;
  const priv = createPrivateKey(keyPem);
  const keys = {
    privateKey: await webcrypto.subtle.importKey('pkcs8', der(priv, 'pkcs8'), EC, true, ['sign']),
    publicKey: await webcrypto.subtle.importKey('spki', der(createPublicKey(priv), 'spki'), EC, true, [
      'verify',
    ]),
  } as webcrypto.CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: `O=system:nodes, CN=system:node:${nodeName}`,
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
  });
  return csr.toString('pem');
}

/** What the bootstrap needs. */
export interface KubeletBootstrapOptions {
  /** The bootstrap kubeconfig's access: server, CA, the bootstrap token. */
  bootstrap: KubeconfigAccess;
  nodeName: string;
  /** The private key to request the certificate for (PEM). */
  keyPem: string;
  /** Where to write kubelet.conf (mode 0600). */
  kubeletConfPath?: string;
  /** Give up at this time (ms since the epoch). */
  deadline: number;
  pollMs?: number;
  /** Node addresses to report. */
  addresses?: string[];
}

/** What happened. */
export interface KubeletBootstrapResult {
  csrName: string;
  /** The Approved condition's reason (who approved it). */
  approvedBy: string;
  certPem: string;
  /** Access as the node (its client certificate). */
  access: KubeconfigAccess;
}

/**
 * Runs the bootstrap; rejects when the CSR is denied (naming the reason and message) or nothing
 * signed it before the deadline ("pending: no approver", as a real kubeadm join then blocks).
 */
export async function kubeletTlsBootstrap(o: KubeletBootstrapOptions): Promise<KubeletBootstrapResult> {
  const request = Buffer.from(await kubeletCsrPem(o.nodeName, o.keyPem)).toString('base64');
  const created = await apiExpect(o.bootstrap, 'POST', CSR_PATH, {
    body: {
      apiVersion: 'certificates.k8s.io/v1',
      kind: 'CertificateSigningRequest',
      metadata: { generateName: 'csr-' },
      spec: { request, signerName: KUBELET_CLIENT_SIGNER, usages: ['digital signature', 'client auth'] },
    },
  });
  const name = String(created.body?.metadata?.name);
  for (;;) {
    const csr = (await apiExpect(o.bootstrap, 'GET', `${CSR_PATH}/${encodeURIComponent(name)}`)).body;
    const conditions: Array<Record<string, string>> = csr?.status?.conditions ?? [];
    const denied = conditions.find((c) => c.type === 'Denied' || c.type === 'Failed');
    if (denied)
      throw new Error(
        `kubelet TLS bootstrap of ${o.nodeName}: CSR ${name} ${denied.type}: ${denied.reason}: ${denied.message}`,
      );
    const approved = conditions.find((c) => c.type === 'Approved');
    if (approved && typeof csr.status.certificate === 'string') {
      const certPem = Buffer.from(csr.status.certificate, 'base64').toString('utf8');
      const access = { server: o.bootstrap.server, caPem: o.bootstrap.caPem, certPem, keyPem: o.keyPem };
      if (o.kubeletConfPath) await writeKubeletConf(o.kubeletConfPath, access, o.nodeName);
      await register(access, o.nodeName, o.addresses ?? []);
      return { csrName: name, approvedBy: approved.reason ?? '', certPem, access };
    }
    if (Date.now() + (o.pollMs ?? 500) > o.deadline)
      throw new Error(
        `kubelet TLS bootstrap of ${o.nodeName}: CSR ${name} ${approved ? 'approved but not signed' : 'still pending: nothing approved it'} before the deadline`,
      );
    await new Promise((r) => setTimeout(r, o.pollMs ?? 500));
  }
}

async function writeKubeletConf(path: string, a: KubeconfigAccess, nodeName: string): Promise<void> {
  const b64 = (t: string) => Buffer.from(t).toString('base64');
  const conf = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'default-cluster',
        cluster: { server: a.server.origin, 'certificate-authority-data': b64(a.caPem) },
      },
    ],
    contexts: [{ name: 'default-context', context: { cluster: 'default-cluster', user: 'default-auth' } }],
    'current-context': 'default-context',
    users: [
      {
        name: 'default-auth',
        user: { 'client-certificate-data': b64(a.certPem ?? ''), 'client-key-data': b64(a.keyPem ?? '') },
      },
    ],
    preferences: { 'node-name': nodeName },
  };
  await writeFile(path, stringifyYaml(conf), { mode: 0o600 });
}

/** Registers the Node (409: registered before) and reports its Ready condition. */
async function register(access: KubeconfigAccess, nodeName: string, addresses: string[]): Promise<void> {
  const created = await apiCall(access, 'POST', '/api/v1/nodes', {
    body: {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: nodeName, labels: { 'kubernetes.io/hostname': nodeName } },
      status: { addresses: addresses.map((address) => ({ type: 'InternalIP', address })) },
    },
  });
  if (created.status !== 201 && created.status !== 409)
    throw new Error(`registering Node ${nodeName}: HTTP ${created.status} ${created.body?.message ?? ''}`);
  const now = new Date().toISOString();
  await apiExpect(access, 'PATCH', `/api/v1/nodes/${encodeURIComponent(nodeName)}/status`, {
    contentType: 'application/merge-patch+json',
    body: {
      status: {
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'kubelet is posting ready status',
            lastHeartbeatTime: now,
            lastTransitionTime: now,
          },
        ],
      },
    },
  });
}

/**
 * kubeadm's token discovery: reads the public cluster-info ConfigMap from `endpoint` (`host:port`)
 * without trusting the server yet, and returns its CA only when SHA-256 of the CA's
 * SubjectPublicKeyInfo is `caCertHash` (`sha256:<hex>`, the join ticket's pin).
 */
export async function discoverClusterCa(endpoint: string, caCertHash: string): Promise<string> {
  const text = await new Promise<string>((resolve, reject) => {
    const req = httpsRequest(
      new URL(CLUSTER_INFO_PATH, `https://${endpoint}`),
      // Not trusted yet: the answer is checked against the pin below, as kubeadm does.
      { method: 'GET', rejectUnauthorized: false, timeout: 30_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          res.statusCode === 200
            ? resolve(Buffer.concat(chunks).toString('utf8'))
            : reject(new Error(`cluster-info from ${endpoint}: HTTP ${res.statusCode}`)),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error(`cluster-info from ${endpoint}: no answer`)));
    req.on('error', reject);
    req.end();
  });
  const kubeconfig = parseYaml(String(JSON.parse(text)?.data?.kubeconfig ?? '')) as {
    clusters?: Array<{ cluster?: Record<string, string> }>;
  };
  const data = kubeconfig.clusters?.[0]?.cluster?.['certificate-authority-data'];
  if (data === undefined) throw new Error(`cluster-info from ${endpoint} names no CA`);
  const caPem = Buffer.from(data, 'base64').toString('utf8');
  const spki = new X509Certificate(caPem).publicKey.export({ type: 'spki', format: 'der' });
  const hash = `sha256:${createHash('sha256').update(spki).digest('hex')}`;
  if (hash !== caCertHash)
    throw new Error(`cluster-info from ${endpoint}: CA ${hash} is not the pinned ${caCertHash}`);
  return caPem;
}

/** What `kubeadm join` hands the kubelet. */
export interface KubeletJoinOptions extends Omit<KubeletBootstrapOptions, 'bootstrap'> {
  /** The API server, `host:port`. */
  endpoint: string;
  /** The bootstrap token (secret). */
  token: string;
  /** The discovery pin, `sha256:<hex>`. */
  caCertHash: string;
}

/**
 * The kubelet's part of `kubeadm join`, which kubeadm waits for: token discovery of the cluster CA
 * (pinned by the ticket's hash), then TLS bootstrap with the bootstrap token and `keyPem`.
 */
export async function kubeletJoin(o: KubeletJoinOptions): Promise<KubeletBootstrapResult> {
  const { endpoint, token, caCertHash, ...rest } = o;
  const caPem = await discoverClusterCa(endpoint, caCertHash);
  return kubeletTlsBootstrap({
    ...rest,
    bootstrap: { server: new URL(`https://${endpoint}`), caPem, token },
  });
}

/**
 * A SIMULATED `kubeadm join` in-process (the demo's nodes): checks the ticket's kubelet certificate
 * as kubeadm-sim does, then {@link kubeletJoin} with the ticket's kubelet key (a confboot node gives
 * its kubelet that key for the bootstrap CSR), its kubelet.conf in `dirOf(nodeName)`; rejects when
 * the CSR is denied or nothing approves it within `timeoutMs`.
 */
export class KubeletBootstrapJoiner implements ClusterJoiner {
  /** The last bootstrap of each node, by name. */
  readonly results = new Map<string, KubeletBootstrapResult>();

  constructor(
    private readonly dirOf: (nodeName: string) => string,
    private readonly timeoutMs = 60_000,
  ) {}

  async joinCluster(args: JoinClusterArgs): Promise<void> {
    const keyPem = await readFile(args.kubeletKeyPath, 'utf8');
    const problems = kubeletCertificateProblems(
      await readFile(args.kubeletCertPath),
      Buffer.from(keyPem),
      args.nodeName,
    );
    if (problems.length > 0)
      throw new ConfbootError(
        'failed-precondition',
        `simulated kubeadm join of ${args.nodeName}: ${problems.join(', ')}`,
      );
    const result = await kubeletJoin({
      endpoint: args.apiServerEndpoint,
      token: args.token,
      caCertHash: args.discoveryTokenCaCertHash,
      nodeName: args.nodeName,
      keyPem,
      kubeletConfPath: join(this.dirOf(args.nodeName), 'kubelet.conf'),
      deadline: Date.now() + this.timeoutMs,
      pollMs: 200,
      ...(args.nodeIp === '' ? {} : { addresses: [args.nodeIp] }),
    });
    this.results.set(args.nodeName, result);
  }
}
