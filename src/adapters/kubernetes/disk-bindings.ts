/**
 * confboot's DiskBinding records in the Kubernetes API: which node a state disk belongs to
 * (docs/identity.md, "State disks are bound to nodes"), shared by every join service replica.
 */
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { DiskBinding, DiskBindings } from '../../ports/disk-bindings.js';
import { ConfbootError } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import { call, DEFAULT_KUBE_REQUEST_TIMEOUT_MS, hasStatus } from './api.js';
import {
  DISK_BINDING_GROUP,
  DISK_BINDING_OWNER_LABEL,
  DISK_BINDING_PLURAL,
  DISK_BINDING_VERSION,
  diskBindingOwnerLabel,
} from './names.js';

/** Where DiskBinding resources live. */
const DISK_BINDING_TARGET = {
  group: DISK_BINDING_GROUP,
  version: DISK_BINDING_VERSION,
  plural: DISK_BINDING_PLURAL,
} as const;

/** The DiskBinding resource name of a disk: `disk-<uuid in lower case>`. */
export function diskBindingName(diskUuid: string): string {
  return `disk-${diskUuid.toLowerCase()}`;
}

/** At most this many of one instance's bindings are read per page when releasing them. */
const RELEASE_PAGE = 50;
/** More pages than this for one instance means the server misbehaves. */
const RELEASE_MAX_PAGES = 20;

/** Options of {@link KubeDiskBindings}. */
export interface KubeDiskBindingsOptions {
  kubeConfig: KubeConfig;
  /** Per-request timeout; default 10 s. */
  requestTimeoutInMs?: number;
  logger?: Logger;
}

/**
 * {@link DiskBindings} as cluster-scoped DiskBinding resources (`confboot.dev/v1alpha1`, name
 * `disk-<uuid>`, spec `{diskUUID, nodeName, owner}`), shared by every join service replica. Binding
 * creates the resource; the API server's create is atomic, so when it exists already (HTTP 409) the
 * existing one is read and returned. Every other failure, and a resource whose spec is not a
 * binding, rejects: the caller then issues nothing. Deleting the resource releases the disk.
 * Each resource carries its owner's digest as a label ({@link DISK_BINDING_OWNER_LABEL}), which is
 * how {@link releaseOthers} finds one instance's bindings; a binding written before the label
 * existed is not found by it and stays.
 */
export class KubeDiskBindings implements DiskBindings {
  private readonly custom: CustomObjectsApi;
  private readonly timeoutMs: number;

  constructor(private readonly options: KubeDiskBindingsOptions) {
    this.custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.timeoutMs = options.requestTimeoutInMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS;
  }

  /** {@inheritDoc DiskBindings.bind} */
  async bind(binding: DiskBinding): Promise<DiskBinding> {
    const diskUuid = binding.diskUuid.toLowerCase();
    const name = diskBindingName(diskUuid);
    const target = DISK_BINDING_TARGET;
    const body = {
      apiVersion: `${DISK_BINDING_GROUP}/${DISK_BINDING_VERSION}`,
      kind: 'DiskBinding',
      metadata: { name, labels: { [DISK_BINDING_OWNER_LABEL]: diskBindingOwnerLabel(binding.owner) } },
      spec: { diskUUID: diskUuid, nodeName: binding.nodeName, owner: binding.owner },
    };
    // Two rounds: a binding deleted between our create (409) and our read (404) is created again.
    for (let round = 0; round < 2; round++) {
      try {
        await call(`creating DiskBinding ${name}`, this.timeoutMs, () =>
          this.custom.createClusterCustomObject({ ...target, body }),
        );
        this.options.logger?.info('Recorded disk binding', {
          diskUuid,
          node: binding.nodeName,
          owner: binding.owner,
        });
        return { ...binding, diskUuid };
      } catch (err) {
        if (!hasStatus(err, 409)) throw err;
      }
      const operation = `reading DiskBinding ${name}`;
      let existing: unknown;
      try {
        existing = await call(operation, this.timeoutMs, () =>
          this.custom.getClusterCustomObject({ ...target, name }),
        );
      } catch (err) {
        if (hasStatus(err, 404)) continue;
        throw err;
      }
      const inForce = bindingOf(existing);
      if (inForce?.diskUuid !== diskUuid)
        throw new ConfbootError(
          'internal',
          `${operation}: spec is not {diskUUID: ${diskUuid}, nodeName, owner}`,
        );
      return inForce;
    }
    throw new ConfbootError(
      'unavailable',
      `binding disk ${diskUuid}: DiskBinding ${name} was deleted while it was being read; retry`,
    );
  }

  /** {@inheritDoc DiskBindings.releaseOthers} */
  async releaseOthers(owners: readonly string[], keep: string): Promise<DiskBinding[]> {
    if (owners.length === 0) return [];
    const kept = keep.toLowerCase();
    const selector = `${DISK_BINDING_OWNER_LABEL} in (${owners.map(diskBindingOwnerLabel).join(',')})`;
    const stale: DiskBinding[] = [];
    let next: string | undefined;
    for (let page = 0; ; page++) {
      if (page === RELEASE_MAX_PAGES)
        throw new ConfbootError('internal', `listing DiskBindings: more than ${RELEASE_MAX_PAGES} pages`);
      const list = (await call('listing DiskBindings', this.timeoutMs, () =>
        this.custom.listClusterCustomObject({
          ...DISK_BINDING_TARGET,
          labelSelector: selector,
          limit: RELEASE_PAGE,
          ...(next === undefined ? {} : { _continue: next }),
        }),
      )) as { items?: unknown; metadata?: { continue?: unknown; _continue?: unknown } };
      for (const item of Array.isArray(list?.items) ? list.items : []) {
        const b = bindingOf(item);
        // The label is a digest: the owner itself decides.
        if (b !== undefined && b.diskUuid !== kept && owners.includes(b.owner)) stale.push(b);
      }
      const token = list?.metadata?.continue ?? list?.metadata?._continue;
      if (typeof token !== 'string' || token === '') break;
      next = token;
    }
    const released: DiskBinding[] = [];
    for (const b of stale) {
      const name = diskBindingName(b.diskUuid);
      try {
        await call(`deleting DiskBinding ${name}`, this.timeoutMs, () =>
          this.custom.deleteClusterCustomObject({ ...DISK_BINDING_TARGET, name }),
        );
      } catch (err) {
        // Released by another replica meanwhile.
        if (!hasStatus(err, 404)) throw err;
        continue;
      }
      released.push(b);
      this.options.logger?.info('Released disk binding', {
        diskUuid: b.diskUuid,
        node: b.nodeName,
        owner: b.owner,
      });
    }
    return released;
  }
}

/** The binding a listed DiskBinding resource records; undefined when its spec is not one. */
function bindingOf(item: unknown): DiskBinding | undefined {
  const spec = (item as { spec?: Record<string, unknown> } | undefined)?.spec;
  const field = (k: string) =>
    typeof spec?.[k] === 'string' && spec[k] !== '' ? (spec[k] as string) : undefined;
  const [diskUuid, nodeName, owner] = [field('diskUUID'), field('nodeName'), field('owner')];
  if (diskUuid === undefined || nodeName === undefined || owner === undefined) return undefined;
  return { diskUuid: diskUuid.toLowerCase(), nodeName, owner };
}
