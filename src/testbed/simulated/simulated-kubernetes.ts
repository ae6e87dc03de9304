/**
 * Simulated Kubernetes for the demo and tests, used where kubeadm and a Kubernetes API server cannot
 * exist (this machine has neither). What stays real: the cluster CA and the other control-plane key
 * material are generated for real (so the join service signs kubelet certificates with a real CA and
 * computes the discovery hash from a real admin.conf), bootstrap tokens have the kubeadm format and a
 * TTL, and the simulated join checks the token, the discovery hash and the kubelet certificate chain
 * the way kubeadm's TLS bootstrap would. Nothing here pretends to run Kubernetes; logs say "simulated".
 * @peculiar/x509 and yaml are loaded by the simulated init that needs them, not at import (the join
 * service's start-up time, see ../pki/x509-loader.ts).
 */
import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  randomInt,
  webcrypto,
  X509Certificate,
} from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { loadX509 } from '../../adapters/pki/x509-loader.js';
import type { BootstrapTokens } from '../../ports/bootstrap-tokens.js';
import type { Clock } from '../../ports/clock.js';
import type { ClusterFacts } from '../../ports/cluster-facts.js';
import type { ClusterInitializer, InitClusterArgs } from '../../ports/cluster-initializer.js';
import type { ClusterJoiner, JoinClusterArgs } from '../../ports/cluster-joiner.js';
import { ConfbootError } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { Component } from '../../ports/types.js';

const TOKEN_ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';
const randomToken = (n: number) => Array.from({ length: n }, () => TOKEN_ALPHABET[randomInt(36)]).join('');

let lastCaHash: { pem: string; hash: string } | undefined;

/** kubeadm's discovery hash: `sha256:` + hex SHA-256 of the certificate's SPKI DER. */
export function caCertHash(certPem: string): string {
  // The CA changes rarely: the last certificate's hash is reused while the PEM is the same.
  if (lastCaHash?.pem !== certPem) {
    const spki = new X509Certificate(certPem).publicKey.export({ type: 'spki', format: 'der' });
    lastCaHash = { pem: certPem, hash: `sha256:${createHash('sha256').update(spki).digest('hex')}` };
  }
  return lastCaHash.hash;
}

/** The simulated control plane's shared state: bootstrap tokens and joined nodes. */
export class SimulatedControlPlane {
  readonly tokens = new Map<string, { secret: string; expires: Date }>();
  readonly joinedNodes: Array<{ name: string; role: string; at: Date }> = [];
  readonly joiningNodes = new Map<string, { isControlPlane: boolean }>();
  components: Component[] = [];
  /** PEM of the cluster CA once initialised. */
  caCertPem: string | undefined;

  constructor(readonly clock: Clock) {}

  /** Whether `token` exists and has not expired. */
  tokenValid(token: string): boolean {
    const [id, secret] = token.split('.');
    const t = this.tokens.get(id ?? '');
    return t !== undefined && t.secret === secret && t.expires > this.clock.now();
  }
}

/** Bootstrap tokens kept in memory (the Kubernetes API is simulated). */
export class InMemoryBootstrapTokens implements BootstrapTokens {
  constructor(private readonly cp: SimulatedControlPlane) {}

  async createToken(ttlMs: number): Promise<string> {
    const id = randomToken(6);
    const secret = randomToken(16);
    this.cp.tokens.set(id, { secret, expires: new Date(this.cp.clock.now().getTime() + ttlMs) });
    return `${id}.${secret}`;
  }

  async discoveryCaCertHash(): Promise<string> {
    if (!this.cp.caCertPem)
      throw new ConfbootError('unavailable', 'computing CA hash: the cluster is not initialised');
    return caCertHash(this.cp.caCertPem);
  }
}

/** Components and JoiningNode records kept in memory (the Kubernetes API is simulated). */
export class InMemoryClusterFacts implements ClusterFacts {
  constructor(private readonly cp: SimulatedControlPlane) {}

  async components(): Promise<Component[]> {
    return this.cp.components.map((c) => ({ ...c }));
  }

  async addJoiningNode(nodeName: string, isControlPlane: boolean): Promise<void> {
    const key = isControlPlane ? 'control-plane' : nodeName;
    if (isControlPlane && this.cp.joiningNodes.has(key))
      throw new ConfbootError('failed-precondition', 'another control-plane node is already joining');
    this.cp.joiningNodes.set(key, { isControlPlane });
  }
}

const SIG_EC = { name: 'ECDSA', hash: 'SHA-256' } as const;
const EC_GEN = { name: 'ECDSA', namedCurve: 'P-256' } as const;

async function selfSignedCa(cn: string, now: Date): Promise<{ certPem: string; keyPem: string }> {
  const x509 = await loadX509();
  const keys = (await webcrypto.subtle.generateKey(EC_GEN, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(webcrypto.getRandomValues(new Uint8Array(16)))
      .toString('hex')
      .replace(/^[89a-f]/, '1'),
    name: `CN=${cn}`,
    notBefore: new Date(now.getTime() - 60_000),
    notAfter: new Date(now.getTime() + 10 * 365 * 24 * 3600_000),
    keys,
    signingAlgorithm: SIG_EC,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    ],
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const keyPem = `-----BEGIN PRIVATE KEY-----\n${pkcs8
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .trim()}\n-----END PRIVATE KEY-----\n`;
  return { certPem: cert.toString('pem'), keyPem };
}

export interface SimulatedInitializerOptions {
  /** Where the eight control-plane files go (kubeadm's /etc/kubernetes/pki). */
  pkiDir: string;
  /** Where admin.conf goes (kubeadm's /etc/kubernetes/admin.conf). */
  adminConfPath: string;
  logger: Logger;
}

/**
 * "kubeadm init", simulated: generates the cluster CA, front-proxy CA, etcd CA and service-account
 * key pair for real, writes them like kubeadm would and returns an admin kubeconfig.
 */
export class SimulatedClusterInitializer implements ClusterInitializer {
  constructor(
    private readonly cp: SimulatedControlPlane,
    private readonly options: SimulatedInitializerOptions,
  ) {}

  async initCluster(args: InitClusterArgs): Promise<Uint8Array> {
    const { pkiDir, adminConfPath, logger } = this.options;
    logger.info('Simulating kubeadm init (kubeadm is not run)', {
      clusterName: args.clusterName,
      nodeName: args.nodeName,
    });
    const now = this.cp.clock.now();
    const [ca, frontProxy, etcd] = await Promise.all([
      selfSignedCa('kubernetes', now),
      selfSignedCa('front-proxy-ca', now),
      selfSignedCa('etcd-ca', now),
    ]);
    // ES256 service-account keys (kubeadm supports them) keep the simulated init fast.
    const sa = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const files: Record<string, string> = {
      'ca.crt': ca.certPem,
      'ca.key': ca.keyPem,
      'front-proxy-ca.crt': frontProxy.certPem,
      'front-proxy-ca.key': frontProxy.keyPem,
      'etcd/ca.crt': etcd.certPem,
      'etcd/ca.key': etcd.keyPem,
      'sa.key': sa.privateKey.export({ type: 'sec1', format: 'pem' }).toString(),
      'sa.pub': sa.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    };
    for (const [name, data] of Object.entries(files)) {
      const p = join(pkiDir, name);
      await mkdir(dirname(p), { recursive: true, mode: 0o700 });
      await writeFile(p, data, { mode: 0o600, flag: 'wx' });
    }
    // As kubeadm: admin.conf names the shared control-plane endpoint (the load balancer) when set.
    const server = `https://${args.controlPlaneEndpoint ?? `${args.nodeIp || '127.0.0.1'}:6443`}`;
    const { stringify } = await import('yaml');
    const kubeconfig = stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: args.clusterName,
          cluster: { server, 'certificate-authority-data': Buffer.from(ca.certPem).toString('base64') },
        },
      ],
      contexts: [
        {
          name: `kubernetes-admin@${args.clusterName}`,
          context: { cluster: args.clusterName, user: 'kubernetes-admin' },
        },
      ],
      'current-context': `kubernetes-admin@${args.clusterName}`,
      users: [{ name: 'kubernetes-admin', user: {} }],
    });
    await mkdir(dirname(adminConfPath), { recursive: true, mode: 0o700 });
    await writeFile(adminConfPath, kubeconfig, { mode: 0o600, flag: 'wx' });
    this.cp.caCertPem = ca.certPem;
    this.cp.components = args.components;
    this.cp.joinedNodes.push({ name: args.nodeName, role: 'ControlPlane', at: now });
    return new TextEncoder().encode(kubeconfig);
  }
}

/**
 * "kubeadm join", simulated: checks what kubeadm's TLS bootstrap would check — a valid, unexpired
 * bootstrap token, the discovery hash of the real cluster CA, and a kubelet client certificate
 * that the cluster CA signed for this node and that matches its key — then records the node.
 */
export class SimulatedClusterJoiner implements ClusterJoiner {
  constructor(
    private readonly cp: SimulatedControlPlane,
    private readonly logger: Logger,
  ) {}

  async joinCluster(args: JoinClusterArgs): Promise<void> {
    this.logger.info('Simulating kubeadm join (kubeadm is not run)', {
      nodeName: args.nodeName,
      role: args.role,
    });
    const fail = (why: string) => {
      throw new ConfbootError('failed-precondition', `simulated kubeadm join of ${args.nodeName}: ${why}`);
    };
    if (!this.cp.caCertPem) fail('the cluster is not initialised');
    if (!/^[a-z0-9]{6}\.[a-z0-9]{16}$/.test(args.token) || !this.cp.tokenValid(args.token))
      fail('bootstrap token unknown or expired');
    if (args.discoveryTokenCaCertHash !== caCertHash(this.cp.caCertPem as string))
      fail('discovery CA hash does not match the cluster CA');
    const cert = new X509Certificate(await readFile(args.kubeletCertPath));
    const key = createPublicKey(await readFile(args.kubeletKeyPath));
    if (!cert.verify(new X509Certificate(this.cp.caCertPem as string).publicKey))
      fail('kubelet certificate is not signed by the cluster CA');
    if (!cert.publicKey.equals(key)) fail('kubelet key does not match its certificate');
    if (!cert.subject.includes(`CN=system:node:${args.nodeName}`))
      fail('kubelet certificate names another node');
    this.cp.joinedNodes.push({ name: args.nodeName, role: args.role, at: this.cp.clock.now() });
  }
}
