/**
 * Join service production wiring: the Kubernetes adapters (bootstrap tokens, cluster facts, disk
 * bindings, refusal Events, the evidence record) behind one loader, so the service listens before
 * @kubernetes/client-node, by far the slowest module to import, has loaded.
 */

import { importOptionalPeer } from '../../adapters/system/optional-peer.js';
import type { BootstrapTokens } from '../../ports/bootstrap-tokens.js';
import type { Clock } from '../../ports/clock.js';
import type { ClusterFacts } from '../../ports/cluster-facts.js';
import type { DiskBindings } from '../../ports/disk-bindings.js';
import { messageOf } from '../../ports/errors.js';
import type { EventRecorder } from '../../ports/event-recorder.js';
import type { EvidenceStore } from '../../ports/evidence-store.js';
import type { Logger } from '../../ports/logger.js';

/** Bootstrap tokens, cluster facts and disk bindings on a Kubernetes client that is loaded on demand. */
export interface LazyKubernetes {
  tokens: BootstrapTokens;
  facts: ClusterFacts;
  /** DiskBinding resources (which node each state disk belongs to). */
  diskBindings: DiskBindings;
  /** Refusals as Events (nothing is sent before the client is loaded; never throws). */
  events: EventRecorder;
  /** EvidenceRecord resources (the evidence record shared by every replica). */
  evidence: EvidenceStore;
  /** Loads the client and the kubeconfig (once); rejects like loadKubeConfig. */
  load(): Promise<void>;
  /** Whether the client is loaded and configured. */
  loaded(): boolean;
}

/**
 * The Kubernetes adapters behind a loader. @kubernetes/client-node is by far the slowest module to
 * import, and tickets need it only after attestation, so the service listens first and loads the
 * client right after; a request arriving meanwhile waits for it.
 */
export function lazyKubernetes(
  options: {
    kubeconfigPath?: string | undefined;
    /** Bounds of the EvidenceRecord store. */
    evidenceRetention?: { maxRecords?: number; maxAgeMs?: number } | undefined;
    /** `reportingInstance` of refusal events. */
    eventInstance?: string | undefined;
  } & ({ caCertPath: string; adminConfPath?: undefined } | { adminConfPath: string; caCertPath?: undefined }),
  clock: Clock,
  logger: Logger,
): LazyKubernetes {
  let adapters:
    | Promise<{
        tokens: BootstrapTokens;
        facts: ClusterFacts;
        diskBindings: DiskBindings;
        events: EventRecorder;
        evidence: EvidenceStore;
      }>
    | undefined;
  let done = false;
  const get = () => {
    adapters ??= importOptionalPeer(() =>
      Promise.all([
        import('../../adapters/kubernetes/api.js'),
        import('../../adapters/kubernetes/bootstrap-tokens.js'),
        import('../../adapters/kubernetes/cluster-facts.js'),
        import('../../adapters/kubernetes/event-recorder.js'),
        import('../../adapters/kubernetes/evidence-store.js'),
        import('../../adapters/kubernetes/disk-bindings.js'),
      ]),
    ).then(([k8s, bootstrapTokens, clusterFacts, ev, store, disks]) => {
      const kubeConfig = k8s.loadKubeConfig(options.kubeconfigPath);
      const loaded = {
        tokens: new bootstrapTokens.KubeBootstrapTokens({
          kubeConfig,
          clock,
          ...(options.caCertPath !== undefined
            ? { caCertPath: options.caCertPath }
            : { adminConfPath: options.adminConfPath }),
          logger,
        }),
        facts: new clusterFacts.KubeClusterFacts({ kubeConfig, clock, logger }),
        diskBindings: new disks.KubeDiskBindings({ kubeConfig, logger }),
        events: new ev.KubeEventRecorder({
          kubeConfig,
          clock,
          logger,
          ...(options.eventInstance !== undefined ? { instance: options.eventInstance } : {}),
        }),
        evidence: new store.KubeEvidenceStore({ kubeConfig, clock, logger, ...options.evidenceRetention }),
      };
      done = true;
      return loaded;
    });
    return adapters;
  };
  return {
    tokens: {
      createToken: async (ttlMs) => (await get()).tokens.createToken(ttlMs),
      discoveryCaCertHash: async () => (await get()).tokens.discoveryCaCertHash(),
    },
    facts: {
      components: async () => (await get()).facts.components(),
      addJoiningNode: async (name, isControlPlane, grant) =>
        (await get()).facts.addJoiningNode(name, isControlPlane, grant),
    },
    diskBindings: {
      bind: async (binding, options) => (await get()).diskBindings.bind(binding, options),
      releaseOthers: async (owners, keep, options) =>
        (await get()).diskBindings.releaseOthers(owners, keep, options),
    },
    events: {
      refused: (event) => {
        get().then(
          (a) => a.events.refused(event),
          () => {},
        );
      },
    },
    evidence: {
      record: async (record) => {
        try {
          await (await get()).evidence.record(record);
        } catch (err) {
          logger.warn('Evidence not recorded', { key: record.key, error: messageOf(err) });
        }
      },
      list: async () => (await get()).evidence.list(),
    },
    load: async () => {
      await get();
    },
    loaded: () => done,
  };
}
