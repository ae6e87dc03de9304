/**
 * The operator's step after `confboot init` (used by `confboot mini`): create the master-secret
 * Secret (`constellation-mastersecret`, keys `mastersecret` and `salt`) through the control plane's
 * Kubernetes API server with @kubernetes/client-node, using only what init returned over attested
 * TLS — the admin kubeconfig with the API server's address, the cluster CA and the admin bearer
 * token.
 *
 * - HTTPS only, and only to a server whose certificate verifies against the cluster CA from that
 *   kubeconfig (the CA alone is trusted, host name/IP checked; a kubeconfig that turns verification
 *   off or carries no CA is refused): otherwise nothing is sent, neither token nor secret.
 * - The creation must succeed (201). A Secret that already exists (409) means someone else created
 *   it first: refused, naming the conflict; this run's master secret is not in use.
 * - Then the Secret is read back and its SHA-256 digests compared with ours (constant time).
 * Neither the secret nor the token is ever printed; errors name statuses and checks only.
 */

import { createHash, timingSafeEqual, X509Certificate } from 'node:crypto';
import { ApiException, CoreV1Api, KubeConfig, type V1Secret } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { errorCode, errorText } from '../../ports/errors.js';
import { MASTER_SECRET_NAME } from './names.js';

/** How to reach the API server, from the admin kubeconfig. */
export interface ApiAccess {
  server: URL;
  caPem: string;
  token: string;
}

/** Why the upload was refused or failed (never carries the secret). */
export class MasterSecretUploadError extends Error {
  constructor(
    readonly check: 'kubeconfig' | 'tls' | 'conflict' | 'unauthorized' | 'status' | 'read-back' | 'network',
    message: string,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'MasterSecretUploadError';
  }
}

// biome-ignore lint/suspicious/noExplicitAny: a kubeconfig document of arbitrary shape
type Doc = Record<string, any>;

/**
 * The API server URL, CA and bearer token of the kubeconfig's current context. Refuses anything
 * but `https:` with `certificate-authority-data`, `insecure-skip-tls-verify`, and a missing token.
 */
export function apiAccessFromKubeconfig(kubeconfig: Uint8Array | string): ApiAccess {
  const fail = (why: string) => new MasterSecretUploadError('kubeconfig', `the admin kubeconfig ${why}`);
  let doc: Doc;
  try {
    doc = parseYaml(typeof kubeconfig === 'string' ? kubeconfig : Buffer.from(kubeconfig).toString('utf8'));
  } catch {
    throw fail('is not YAML');
  }
  const context = (doc?.contexts ?? []).find((c: Doc) => c?.name === doc?.['current-context'])?.context;
  const cluster = (doc?.clusters ?? []).find((c: Doc) => c?.name === context?.cluster)?.cluster;
  const user = (doc?.users ?? []).find((u: Doc) => u?.name === context?.user)?.user;
  if (cluster === undefined || user === undefined) throw fail('has no current context with cluster and user');
  if (cluster['insecure-skip-tls-verify'] === true) throw fail('turns TLS verification off');
  let server: URL;
  try {
    server = new URL(String(cluster.server));
  } catch {
    throw fail('has no valid server URL');
  }
  if (server.protocol !== 'https:') throw fail(`server is ${server.protocol}, not https:`);
  const caData = cluster['certificate-authority-data'];
  if (typeof caData !== 'string' || caData === '') throw fail('carries no certificate-authority-data');
  const caPem = Buffer.from(caData, 'base64').toString('utf8');
  try {
    if (!new X509Certificate(caPem).ca) throw new Error('not a CA');
  } catch {
    throw fail('carries no CA certificate');
  }
  if (typeof user.token !== 'string' || user.token === '') throw fail('carries no bearer token');
  return { server, caPem, token: user.token };
}

const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH']);
const TLS_ERROR = /CERT|SIGNATURE|ALTNAME|SELF_SIGNED|ISSUER|VERIFY|ERR_TLS|ERR_SSL/;

/** A client for exactly `access`: its server, its CA alone, its token. */
function clientOf(access: ApiAccess): CoreV1Api {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'cluster',
        server: access.server.toString().replace(/\/$/, ''),
        caData: Buffer.from(access.caPem).toString('base64'),
        skipTLSVerify: false,
      },
    ],
    users: [{ name: 'admin', token: access.token }],
    contexts: [{ name: 'admin', cluster: 'cluster', user: 'admin' }],
    currentContext: 'admin',
  });
  return kc.makeApiClient(CoreV1Api);
}

/** Runs `fn` with a deadline (the request keeps running in the background after it passes). */
async function within<T>(timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      fn(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A refusal for a failed call: the HTTP status, a TLS verification failure, or the network. */
function callError(err: unknown, what: string): MasterSecretUploadError {
  if (err instanceof ApiException) {
    if (err.code === 401 || err.code === 403)
      return new MasterSecretUploadError(
        'unauthorized',
        `${what}: the API server refused the admin token from init (HTTP ${err.code})`,
        { cause: err },
      );
    let message = '';
    try {
      message = String((JSON.parse(String(err.body)) as { message?: unknown }).message ?? '').slice(0, 200);
    } catch {}
    return new MasterSecretUploadError('status', `${what}: HTTP ${err.code} ${message}`.trim(), {
      cause: err,
    });
  }
  const code = errorCode(err);
  if (TLS_ERROR.test(code))
    return new MasterSecretUploadError(
      'tls',
      `${what}: the API server's certificate does not verify against the cluster CA from init (${code}); nothing was sent`,
      { cause: err },
    );
  return new MasterSecretUploadError('network', `${what}: ${code || errorText(err)}`, {
    cause: err,
  });
}

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest();

/**
 * Creates the master-secret Secret and checks it holds ours. Connection refusals (nothing sent yet:
 * the API server may still be starting) are retried until `deadline` (epoch ms), each announced to
 * `onWait` with the refusal's code; everything else is final. Throws {@link MasterSecretUploadError}.
 */
export async function uploadMasterSecret(
  access: ApiAccess,
  secret: { masterSecret: Uint8Array; salt: Uint8Array },
  options: {
    deadline: number;
    requestTimeoutMs?: number;
    retryDelayMs?: number;
    onWait?: (line: string) => void;
  },
): Promise<void> {
  const timeoutMs = options.requestTimeoutMs ?? 60_000;
  const retryDelayMs = options.retryDelayMs ?? 1000;
  const core = clientOf(access);
  const body: V1Secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'Opaque',
    metadata: { name: MASTER_SECRET_NAME, namespace: 'kube-system' },
    data: {
      mastersecret: Buffer.from(secret.masterSecret).toString('base64'),
      salt: Buffer.from(secret.salt).toString('base64'),
    },
  };
  const create = 'creating the master-secret Secret';
  for (;;) {
    try {
      await within(timeoutMs, () => core.createNamespacedSecret({ namespace: 'kube-system', body }));
      break;
    } catch (err) {
      if (err instanceof ApiException && err.code === 409)
        throw new MasterSecretUploadError(
          'conflict',
          `refused: Secret kube-system/${MASTER_SECRET_NAME} already exists in the API server — someone else created it before this operator; this run's master secret is not the cluster's`,
        );
      const code = errorCode(err);
      if (CONNECT_ERRORS.has(code) && Date.now() + retryDelayMs < options.deadline) {
        options.onWait?.(
          `API server ${access.server.host} not reachable yet (${code}); retrying in ${retryDelayMs} ms`,
        );
        await new Promise((r) => setTimeout(r, retryDelayMs));
        continue;
      }
      throw callError(err, create);
    }
  }
  let stored: V1Secret;
  try {
    stored = await within(timeoutMs, () =>
      core.readNamespacedSecret({ name: MASTER_SECRET_NAME, namespace: 'kube-system' }),
    );
  } catch (err) {
    const e = callError(err, 'reading the master-secret Secret back');
    throw new MasterSecretUploadError('read-back', e.message, { cause: err });
  }
  const same = (value: unknown, ours: Uint8Array) =>
    typeof value === 'string' && timingSafeEqual(sha256(Buffer.from(value, 'base64')), sha256(ours));
  if (!same(stored.data?.mastersecret, secret.masterSecret) || !same(stored.data?.salt, secret.salt))
    throw new MasterSecretUploadError(
      'read-back',
      `refused: Secret kube-system/${MASTER_SECRET_NAME} as read back does not hold this operator's master secret and salt (SHA-256 differs)`,
    );
}
