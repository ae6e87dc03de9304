/**
 * The cluster facts the join service reads and records on the Kubernetes API
 * (@kubernetes/client-node): the components list behind upstream's NodeVersion resource, and a
 * JoiningNode record per joining node, which the node operator reads.
 */

import {
  ApiException,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from '@kubernetes/client-node';
import type { Clock } from '../../ports/clock.js';
import type { ClusterFacts } from '../../ports/cluster-facts.js';
import { ConfbootError } from '../../ports/errors.js';
import type { KubeletCredentialsGrant } from '../../ports/joining-nodes.js';
import { normalizeNodeName } from '../../ports/kubernetes-node.js';
import type { Logger } from '../../ports/logger.js';
import type { Component } from '../../ports/types.js';
import { parseComponentList } from '../components/component-list.js';
import {
  call,
  DEFAULT_KUBE_REQUEST_TIMEOUT_MS,
  JOIN_SERVICE_FIELD_MANAGER,
  KUBE_SYSTEM,
  NODE_VERSION_NAME,
  rfc3339,
  UPDATE_GROUP,
  UPDATE_VERSION,
} from './api.js';

/** How long a joining worker / control plane stays recorded (upstream: 48 h / 10 min). */
export const WORKER_JOIN_DEADLINE_MS = 48 * 3600_000;
export const CONTROL_PLANE_JOIN_DEADLINE_MS = 10 * 60_000;

/** Options of {@link KubeClusterFacts}. */
export interface KubeClusterFactsOptions {
  kubeConfig: KubeConfig;
  /** Source of "now" for JoiningNode deadlines. */
  clock: Clock;
  /** Per-request timeout; default 10 s. */
  requestTimeoutInMs?: number;
  logger?: Logger;
}

/** {@link ClusterFacts} from the NodeVersion resource, its components ConfigMap, and JoiningNode resources. */
export class KubeClusterFacts implements ClusterFacts {
  private readonly core: CoreV1Api;
  private readonly custom: CustomObjectsApi;
  private readonly timeoutMs: number;

  constructor(private readonly options: KubeClusterFactsOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.timeoutMs = options.requestTimeoutInMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS;
  }

  /** The name of the components ConfigMap, from NodeVersion `constellation-version`. */
  private async componentsReference(): Promise<string> {
    const operation = `reading NodeVersion ${NODE_VERSION_NAME}`;
    const nv = (await call(operation, this.timeoutMs, () =>
      this.custom.getClusterCustomObject({
        group: UPDATE_GROUP,
        version: UPDATE_VERSION,
        plural: 'nodeversions',
        name: NODE_VERSION_NAME,
      }),
    )) as { spec?: { kubernetesComponentsReference?: unknown } };
    const ref = nv?.spec?.kubernetesComponentsReference;
    if (typeof ref !== 'string' || ref === '')
      throw new ConfbootError(
        'failed-precondition',
        `${operation}: spec.kubernetesComponentsReference is not set`,
      );
    return ref;
  }

  /** The components listed in the ConfigMap the NodeVersion references (key `components`). */
  async components(): Promise<Component[]> {
    const ref = await this.componentsReference();
    const operation = `reading components from ConfigMap ${KUBE_SYSTEM}/${ref}`;
    const cm = await call(operation, this.timeoutMs, () =>
      this.core.readNamespacedConfigMap({ name: ref, namespace: KUBE_SYSTEM }),
    );
    const raw = cm.data?.components;
    if (raw === undefined)
      throw new ConfbootError('failed-precondition', `${operation}: no "components" key`);
    return parseComponentList(raw, operation, 'internal');
  }

  /**
   * Records a joining node as a JoiningNode resource. Workers are applied server-side (field manager
   * `join-service`, deadline now+48 h); a control plane is created as `control-plane` (deadline
   * now+10 min), so a second concurrently joining control plane fails with `failed-precondition`.
   */
  async addJoiningNode(
    nodeName: string,
    isControlPlane: boolean,
    grant?: KubeletCredentialsGrant,
  ): Promise<void> {
    const name = normalizeNodeName(nodeName);
    const ref = await this.componentsReference();
    const now = this.options.clock.now().getTime();
    const objectName = isControlPlane ? 'control-plane' : name;
    const body = {
      apiVersion: `${UPDATE_GROUP}/${UPDATE_VERSION}`,
      kind: 'JoiningNode',
      metadata: { name: objectName },
      spec: {
        name,
        componentsreference: ref,
        iscontrolplane: isControlPlane,
        deadline: rfc3339(
          new Date(now + (isControlPlane ? CONTROL_PLANE_JOIN_DEADLINE_MS : WORKER_JOIN_DEADLINE_MS)),
        ),
        // What the node operator approves the kubelet's client CSR for (not secret).
        ...(grant === undefined
          ? {}
          : { bootstraptokenid: grant.bootstrapTokenId, kubeletkeysha256: grant.kubeletKeySha256 }),
      },
    };
    const target = { group: UPDATE_GROUP, version: UPDATE_VERSION, plural: 'joiningnodes' };
    if (isControlPlane) {
      const operation = `creating JoiningNode control-plane for node ${name}`;
      try {
        await call(operation, this.timeoutMs, () =>
          this.custom.createClusterCustomObject({ ...target, body }),
        );
      } catch (err) {
        if (err instanceof ConfbootError && err.cause instanceof ApiException && err.cause.code === 409)
          throw new ConfbootError(
            'failed-precondition',
            `${operation}: another control-plane node is already joining`,
            {
              cause: err,
            },
          );
        throw err;
      }
    } else {
      await call(`applying JoiningNode ${name}`, this.timeoutMs, () =>
        this.custom.patchClusterCustomObject(
          { ...target, name, body, fieldManager: JOIN_SERVICE_FIELD_MANAGER },
          setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
        ),
      );
    }
    this.options.logger?.info('Recorded joining node', { node: name, controlPlane: isControlPlane });
  }
}
