/**
 * A small HTTPS client of a Kubernetes API server for the SIMULATED kubelet and controller-manager
 * (plain node:https, so the in-VM agent needs no Kubernetes client): one request with the access a
 * kubeconfig gives (cluster CA, bearer token or client certificate), a JSON answer, bounded in time
 * and size.
 */
import { request } from 'node:https';
import type { KubeconfigAccess } from './kubelet-volumes.js';

/** An answer: HTTP status and parsed JSON body (undefined when empty or not JSON). */
export interface ApiAnswer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects of arbitrary shape
  body: any;
}

/** `method path` with `body` (JSON unless `contentType` says otherwise); rejects only on transport errors. */
export function apiCall(
  access: KubeconfigAccess,
  method: string,
  path: string,
  options: { body?: unknown; contentType?: string; timeoutMs?: number } = {},
): Promise<ApiAnswer> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
  return new Promise((resolve, reject) => {
    const req = request(
      new URL(path, access.server),
      {
        method,
        ca: access.caPem,
        ...(access.certPem && access.keyPem ? { cert: access.certPem, key: access.keyPem } : {}),
        headers: {
          accept: 'application/json',
          ...(access.token ? { authorization: `Bearer ${access.token}` } : {}),
          ...(payload
            ? { 'content-type': options.contentType ?? 'application/json', 'content-length': payload.length }
            : {}),
        },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > 4 * 1024 * 1024) req.destroy(new Error(`${method} ${path}: answer larger than 4 MiB`));
          else chunks.push(c);
        });
        res.on('end', () => {
          let body: unknown;
          try {
            body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {}
          resolve({ status: res.statusCode ?? 0, body });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** Like {@link apiCall}, but rejects unless the status is one of `ok` (default 200, 201). */
export async function apiExpect(
  access: KubeconfigAccess,
  method: string,
  path: string,
  options: { body?: unknown; contentType?: string; timeoutMs?: number; ok?: number[] } = {},
): Promise<ApiAnswer> {
  const answer = await apiCall(access, method, path, options);
  if (!(options.ok ?? [200, 201]).includes(answer.status))
    throw new Error(
      `${method} ${path}: HTTP ${answer.status}${answer.body?.message ? ` ${answer.body.message}` : ''}`,
    );
  return answer;
}
