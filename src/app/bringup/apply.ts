/**
 * Applies the bring-up objects (objects.ts) through a kubeconfig with @kubernetes/client-node: each
 * with server-side apply (field manager `confboot`) or create-if-missing, in order, saying per object
 * whether it was created, configured or unchanged; then waits, bounded, until the join-service
 * DaemonSet and the key-service Deployment report ready pods. A second run against the same cluster
 * changes nothing and says so. Nothing secret is printed.
 */
import {
  type KubeConfig,
  type KubernetesObject,
  KubernetesObjectApi,
  PatchStrategy,
} from '@kubernetes/client-node';
import { ConfbootError, errorText } from '../../ports/errors.js';
import type { BringupObject } from './objects.js';

/** The field manager of confboot's server-side apply. */
export const FIELD_MANAGER = 'confboot';
/** Default bound on waiting for the workloads to be ready. */
export const DEFAULT_READY_TIMEOUT_MS = 5 * 60_000;

/** What happened to one object. */
export interface AppliedObject {
  kind: string;
  name: string;
  action: 'created' | 'configured' | 'unchanged' | 'kept';
}

/** Options of {@link applyObjects}. */
export interface ApplyOptions {
  /** Server-side dry run: the API server validates everything, nothing is stored, nothing awaited. */
  dryRun?: boolean;
  /** One line per object and per wait (never secret content). */
  progress?: (line: string) => void;
  /** Bound on the readiness wait; default 5 minutes. */
  readyTimeoutInMs?: number;
  /** Time between readiness polls; default 2 s. */
  pollIntervalInMs?: number;
}

const describe = (o: KubernetesObject) =>
  `${o.kind} ${o.metadata?.namespace ? `${o.metadata.namespace}/` : ''}${o.metadata?.name}`;

function statusOf(err: unknown): number | undefined {
  const e = err as { code?: unknown; statusCode?: unknown };
  return typeof e?.code === 'number' ? e.code : typeof e?.statusCode === 'number' ? e.statusCode : undefined;
}

/** Applies `objects` in order (see the module header); rejects naming the object that failed. */
export async function applyObjects(
  kc: KubeConfig,
  objects: readonly BringupObject[],
  options: ApplyOptions = {},
): Promise<AppliedObject[]> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  const dryRun = options.dryRun ? 'All' : undefined;
  const say = options.progress ?? (() => {});
  const out: AppliedObject[] = [];
  for (const { object, mode } of objects) {
    const what = describe(object);
    const header = {
      apiVersion: object.apiVersion as string,
      kind: object.kind as string,
      metadata: {
        name: object.metadata?.name as string,
        ...(object.metadata?.namespace ? { namespace: object.metadata.namespace } : {}),
      },
    };
    try {
      let existing: KubernetesObject | undefined;
      try {
        existing = await api.read(header);
      } catch (err) {
        if (statusOf(err) !== 404) throw err;
      }
      let action: AppliedObject['action'];
      if (mode !== 'apply' && existing !== undefined) {
        if (
          mode === 'must-match' &&
          JSON.stringify((existing as { data?: unknown }).data ?? {}) !==
            JSON.stringify((object as { data?: unknown }).data ?? {})
        )
          throw new ConfbootError(
            'failed-precondition',
            'it exists with other content; refusing to replace it (a different master secret would lock every state disk)',
          );
        action = 'kept';
      } else if (mode !== 'apply') {
        await api.create(object, undefined, dryRun, FIELD_MANAGER);
        action = 'created';
      } else {
        const applied = await api.patch(
          object,
          undefined,
          dryRun,
          FIELD_MANAGER,
          true,
          PatchStrategy.ServerSideApply,
        );
        action =
          existing === undefined
            ? 'created'
            : applied.metadata?.resourceVersion === existing.metadata?.resourceVersion
              ? 'unchanged'
              : 'configured';
      }
      say(`${what} ${action}${options.dryRun ? ' (dry run)' : ''}`);
      out.push({ kind: header.kind, name: header.metadata.name, action });
    } catch (err) {
      const body = (err as { body?: unknown }).body;
      const detail = typeof body === 'string' && body.length < 500 ? `: ${body}` : '';
      throw new ConfbootError('failed-precondition', `applying ${what}: ${errorText(err)}${detail}`, {
        cause: err,
      });
    }
  }
  const changed = out.filter((o) => o.action === 'created' || o.action === 'configured').length;
  say(
    changed === 0
      ? 'Nothing changed: the cluster already has every object'
      : `${changed} of ${out.length} objects created or changed`,
  );
  if (!options.dryRun)
    await waitReady(
      api,
      objects.map((o) => o.object),
      options,
      say,
    );
  return out;
}

/** Waits until every DaemonSet and Deployment among `objects` has ready pods, bounded. */
async function waitReady(
  api: KubernetesObjectApi,
  objects: readonly KubernetesObject[],
  options: ApplyOptions,
  say: (line: string) => void,
): Promise<void> {
  const timeoutMs = options.readyTimeoutInMs ?? DEFAULT_READY_TIMEOUT_MS;
  const intervalMs = options.pollIntervalInMs ?? 2_000;
  const deadline = Date.now() + timeoutMs;
  for (const o of objects.filter((x) => x.kind === 'DaemonSet' || x.kind === 'Deployment')) {
    const what = describe(o);
    say(`Waiting for ${what} to be ready`);
    for (;;) {
      const live = (await api.read({
        apiVersion: o.apiVersion as string,
        kind: o.kind as string,
        metadata: { name: o.metadata?.name as string, namespace: o.metadata?.namespace as string },
      })) as KubernetesObject & { status?: Record<string, number | undefined> };
      const s = live.status ?? {};
      const ready =
        o.kind === 'DaemonSet'
          ? (s.desiredNumberScheduled ?? 0) > 0 && s.numberReady === s.desiredNumberScheduled
          : (s.readyReplicas ?? 0) >= 1;
      if (ready) {
        say(`${what} ready`);
        break;
      }
      if (Date.now() + intervalMs > deadline)
        throw new ConfbootError(
          'deadline-exceeded',
          `waiting for ${what} to be ready: not ready within ${timeoutMs} ms (status ${JSON.stringify(s)})`,
        );
      await new Promise((r) => setTimeout(r, intervalMs));
    }
  }
}
