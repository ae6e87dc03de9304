/**
 * What a kubelet does for a pod's ConfigMap and Secret volumes, for a SIMULATED node where no
 * kubelet runs (mini's control planes): reads the named ConfigMaps and Secrets of a namespace from
 * the API server with the node's admin.conf — HTTPS to its server, trusting only its cluster CA,
 * authenticating with its bearer token or its client certificate — and returns their data as bytes.
 * Objects that do not exist yet are asked for again (bounded by a deadline), as a kubelet waits for
 * a pod's volumes. Plain node:https and yaml, so the small in-VM agent needs no Kubernetes client.
 * The returned data holds secrets; nothing here logs it.
 */
import { request } from 'node:https';
import { parse as parseYaml } from 'yaml';

/** The API server access an admin.conf gives. */
export interface KubeconfigAccess {
  server: URL;
  caPem: string;
  token?: string;
  certPem?: string;
  keyPem?: string;
}

/** Reads the first cluster and user of a kubeconfig (inline `*-data` fields only, as kubeadm writes them). */
export function kubeconfigAccess(text: string): KubeconfigAccess {
  const config = parseYaml(text) as {
    clusters?: Array<{ cluster?: Record<string, string> }>;
    users?: Array<{ user?: Record<string, string> }>;
  };
  const cluster = config.clusters?.[0]?.cluster ?? {};
  const user = config.users?.[0]?.user ?? {};
  const b64 = (v: string | undefined) =>
    v === undefined ? undefined : Buffer.from(v, 'base64').toString('utf8');
  const caPem = b64(cluster['certificate-authority-data']);
  if (cluster.server === undefined || caPem === undefined)
    throw new Error('kubeconfig: the first cluster needs server and certificate-authority-data');
  const certPem = b64(user['client-certificate-data']);
  const keyPem = b64(user['client-key-data']);
  if (user.token === undefined && (certPem === undefined || keyPem === undefined))
    throw new Error(
      'kubeconfig: the first user needs a token or client-certificate-data and client-key-data',
    );
  return {
    server: new URL(cluster.server),
    caPem,
    ...(user.token === undefined ? {} : { token: user.token }),
    ...(certPem === undefined || keyPem === undefined ? {} : { certPem, keyPem }),
  };
}

/** GET `path` on the API server: the parsed body, or undefined on 404. */
function getObject(
  access: KubeconfigAccess,
  path: string,
  timeoutMs: number,
): Promise<Record<string, unknown> | undefined> {
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, access.server),
      {
        method: 'GET',
        ca: access.caPem,
        ...(access.certPem && access.keyPem ? { cert: access.certPem, key: access.keyPem } : {}),
        headers: {
          accept: 'application/json',
          ...(access.token ? { authorization: `Bearer ${access.token}` } : {}),
        },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > 4 * 1024 * 1024) req.destroy(new Error(`GET ${path}: answer larger than 4 MiB`));
          else chunks.push(c);
        });
        res.on('end', () => {
          if (res.statusCode === 404) return resolve(undefined);
          if (res.statusCode !== 200) return reject(new Error(`GET ${path}: HTTP ${res.statusCode}`));
          try {
            resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>);
          } catch {
            reject(new Error(`GET ${path}: the answer is not JSON`));
          }
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`GET ${path}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** The volumes to read: ConfigMap and Secret names in `namespace`. */
export interface VolumeSources {
  namespace: string;
  configMaps?: string[];
  secrets?: string[];
}

/** Each object's keys and values as bytes (ConfigMap `data` and `binaryData`, Secret `data`). */
export type VolumeData = Map<string, Map<string, Buffer>>;

/**
 * Reads every ConfigMap and Secret of `sources` (keyed `configmap/<name>`, `secret/<name>`), asking
 * again every `pollMs` for those not there yet, until `deadline` (ms since the epoch); a transport
 * error is retried the same way. Rejects naming what is still missing.
 */
export async function readVolumes(
  access: KubeconfigAccess,
  sources: VolumeSources,
  options: { deadline: number; pollMs?: number },
): Promise<VolumeData> {
  const ns = encodeURIComponent(sources.namespace);
  const wanted = [
    ...(sources.configMaps ?? []).map((n) => [
      'configmap',
      n,
      `/api/v1/namespaces/${ns}/configmaps/${encodeURIComponent(n)}`,
    ]),
    ...(sources.secrets ?? []).map((n) => [
      'secret',
      n,
      `/api/v1/namespaces/${ns}/secrets/${encodeURIComponent(n)}`,
    ]),
  ] as Array<[string, string, string]>;
  const out: VolumeData = new Map();
  let lastError = '';
  for (;;) {
    for (const [kind, name, path] of wanted) {
      if (out.has(`${kind}/${name}`)) continue;
      try {
        const obj = await getObject(
          access,
          path,
          Math.max(1000, Math.min(30_000, options.deadline - Date.now())),
        );
        if (obj === undefined) continue;
        const files = new Map<string, Buffer>();
        for (const [k, v] of Object.entries((obj.data ?? {}) as Record<string, string>))
          files.set(k, kind === 'secret' ? Buffer.from(v, 'base64') : Buffer.from(v, 'utf8'));
        for (const [k, v] of Object.entries((obj.binaryData ?? {}) as Record<string, string>))
          files.set(k, Buffer.from(v, 'base64'));
        out.set(`${kind}/${name}`, files);
      } catch (err) {
        lastError = (err as Error).message;
      }
    }
    const missing = wanted.filter(([kind, name]) => !out.has(`${kind}/${name}`));
    if (missing.length === 0) return out;
    if (Date.now() + (options.pollMs ?? 1000) > options.deadline)
      throw new Error(
        `reading pod volumes from ${access.server.origin}: still missing ${missing.map(([k, n]) => `${k}/${n}`).join(', ')}${lastError ? ` (last error: ${lastError})` : ''}`,
      );
    await new Promise((r) => setTimeout(r, options.pollMs ?? 1000));
  }
}
