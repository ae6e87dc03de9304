/**
 * The Kubernetes API client plumbing every Kubernetes adapter shares (@kubernetes/client-node 1.3):
 * loading a kubeconfig (or the in-cluster service account), one call with a deadline, failures
 * mapped to ConfbootErrors that say which object failed (an unreachable or failing API server is
 * `unavailable`), and the names and timestamps of upstream's resources. The adapters per resource
 * kind sit beside it: bootstrap-tokens.ts, cluster-facts.ts, disk-bindings.ts, evidence-store.ts,
 * event-recorder.ts, join-config.ts, node-operator-api.ts, cluster-status.ts.
 */

import { ApiException, type KubeConfig } from '@kubernetes/client-node';
import { ConfbootError, errorText, isConfbootError } from '../../ports/errors.js';
import { PooledKubeConfig } from './pooled-kube-config.js';

/** Namespace of bootstrap tokens and the components ConfigMap (upstream `ConstellationNamespace`). */
export const KUBE_SYSTEM = 'kube-system';
/** Group, version and name of upstream's node-operator resources. */
export const UPDATE_GROUP = 'update.edgeless.systems';
export const UPDATE_VERSION = 'v1alpha1';
export const NODE_VERSION_NAME = 'constellation-version';
/** Field manager of JoiningNode server-side apply (upstream's). */
export const JOIN_SERVICE_FIELD_MANAGER = 'join-service';
/** Default per-request timeout towards the API server. */
export const DEFAULT_KUBE_REQUEST_TIMEOUT_MS = 10_000;

/**
 * A KubeConfig from a kubeconfig file, or the in-cluster service account when no path is given; its
 * API clients share one connection pool (pooled-kube-config.ts).
 * @throws ConfbootError `failed-precondition` when the file cannot be read or we are not in a pod.
 */
export function loadKubeConfig(kubeconfigPath?: string): KubeConfig {
  const kc: KubeConfig = new PooledKubeConfig();
  try {
    if (kubeconfigPath !== undefined) kc.loadFromFile(kubeconfigPath);
    else {
      if (!process.env.KUBERNETES_SERVICE_HOST || !process.env.KUBERNETES_SERVICE_PORT)
        throw new Error('KUBERNETES_SERVICE_HOST/PORT are not set (not running in a pod)');
      kc.loadFromCluster();
    }
  } catch (err) {
    throw new ConfbootError(
      'failed-precondition',
      `loading Kubernetes client configuration from ${kubeconfigPath ?? 'the in-cluster service account'}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  if (kc.getCurrentCluster() === null)
    throw new ConfbootError(
      'failed-precondition',
      `loading Kubernetes client configuration from ${kubeconfigPath}: no current cluster`,
    );
  return kc;
}

/** RFC 3339 in UTC with second precision, as Go's `time.RFC3339` / metav1.Time write it. */
export function rfc3339(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** Maps a client-node failure to a ConfbootError naming `operation`. */
export function kubeError(operation: string, err: unknown): ConfbootError {
  if (isConfbootError(err)) return err;
  if (err instanceof ApiException) {
    const status = err.code;
    let detail = `HTTP ${status}`;
    try {
      const body = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
      if (body && typeof body.message === 'string') detail = `HTTP ${status}: ${body.message}`;
    } catch {
      // Not a Status object; the code alone must do.
    }
    const code =
      status >= 500 || status === 429
        ? 'unavailable'
        : status === 404 || status === 409
          ? 'failed-precondition'
          : 'internal';
    return new ConfbootError(code, `${operation}: ${detail}`, { cause: err });
  }
  // No HTTP answer at all: connection refused, DNS, TLS, reset.
  return new ConfbootError('unavailable', `${operation}: Kubernetes API unreachable: ${errorText(err)}`, {
    cause: err,
  });
}

/** Runs one API call with a deadline; the request keeps running in the background after it passes. */
export async function call<T>(operation: string, timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new ConfbootError(
            'unavailable',
            `${operation}: Kubernetes API did not answer within ${timeoutMs} ms`,
          ),
        ),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([fn(), deadline]);
  } catch (err) {
    throw kubeError(operation, err);
  } finally {
    clearTimeout(timer);
  }
}

/** One page of a LIST: the typed client names the continue token `_continue`, raw JSON `continue`. */
export interface ListPage<T> {
  items?: T[];
  metadata?: { continue?: string; _continue?: string };
}

/**
 * Every item of a paged LIST: `page(token)` fetches the page after `token` (undefined: the first),
 * each with {@link call}'s deadline, until a page carries no continue token. More than `maxPages`
 * pages is an error, so a server that never ends the list cannot hold the caller forever.
 */
export async function listAllPages<T>(
  operation: string,
  timeoutMs: number,
  maxPages: number,
  page: (token?: string) => Promise<ListPage<T>>,
): Promise<T[]> {
  const items: T[] = [];
  let token: string | undefined;
  for (let i = 0; i < maxPages; i++) {
    const list = await call(operation, timeoutMs, () => page(token));
    items.push(...(list.items ?? []));
    token = list.metadata?._continue || list.metadata?.continue || undefined;
    if (token === undefined) return items;
  }
  throw new ConfbootError('internal', `${operation}: more than ${maxPages} pages`);
}

/** Whether `err` (from {@link call}) is the API server's answer with HTTP status `code`. */
export function hasStatus(err: unknown, code: number): boolean {
  return err instanceof ConfbootError && err.cause instanceof ApiException && err.cause.code === code;
}
