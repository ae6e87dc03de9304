/**
 * What `confboot status` reads from a running cluster: a snapshot of what the cluster already records
 * (Nodes, NodeVersion, the join service's EvidenceRecords, DiskBindings and refusal Events, the join
 * service's pods and the attestation config in force). The domain (cluster-status.ts) turns it into
 * one row per node and decides which nodes are out of policy.
 */
import type { DiskBinding } from './disk-bindings.js';
import type { EvidenceRecord } from './evidence-store.js';
import type { ReattestationResult } from './reattestation.js';
import type { CallOptions } from './types.js';

/** One Kubernetes Node as status needs it. */
export interface StatusNode {
  name: string;
  /** `node-role.kubernetes.io/control-plane` present. */
  controlPlane: boolean;
  /** The Node's addresses (InternalIP, ExternalIP), which refusals from the node's own address match. */
  addresses: string[];
  /** The Node's Ready condition; undefined when it reports none. */
  ready: boolean | undefined;
  /** When the Node object was created (ISO 8601); the oldest control plane is the one `init` set up. */
  createdAt: string | undefined;
}

/**
 * An evidence record without its byte fields (status shows decisions, never documents), with the
 * node operator's last re-attestation of the node when its record carries one.
 */
export type StatusEvidence = Omit<EvidenceRecord, 'document' | 'nonce' | 'userData'> & {
  lastReattestation?: ReattestationResult;
};

/** One refusal Event of the join service, as its message names the caller. */
export interface StatusRefusalEvent {
  /** The Event's reason (the refusal's reason code in UpperCamelCase, e.g. `MeasurementMismatch`). */
  reason: string;
  /** The node the refused request named, when it named one. */
  nodeName: string | undefined;
  /** The caller's address (host) the refusal came from. */
  host: string | undefined;
  /** When the latest refusal of the series happened (ISO 8601). */
  at: string;
  /** Refusals counted on the Event. */
  count: number;
}

/** One pod of the join service. */
export interface JoinServicePod {
  name: string;
  /** The node it runs on; undefined while unscheduled. */
  nodeName: string | undefined;
  /** The pod's Ready condition. */
  ready: boolean;
}

/** The NodeVersion resource's spec fields status shows. */
export interface StatusNodeVersion {
  imageReference?: string;
  imageVersion?: string;
  kubernetesClusterVersion?: string;
}

/** Everything `confboot status` reads, at one moment. */
export interface ClusterSnapshot {
  nodes: StatusNode[];
  /** NodeVersion `constellation-version`; undefined when it does not exist. */
  nodeVersion: StatusNodeVersion | undefined;
  evidence: StatusEvidence[];
  diskBindings: DiskBinding[];
  refusals: StatusRefusalEvent[];
  joinServicePods: JoinServicePod[];
  /** The attestation config in force (ConfigMap join-config, key attestationConfig); undefined when absent. */
  attestationConfig: string | undefined;
}

/** Reads a {@link ClusterSnapshot}. */
export interface ClusterSnapshotSource {
  /**
   * Reads the snapshot. Rejects (`unavailable`) when the cluster cannot be read: the caller then
   * cannot decide whether the cluster is in policy.
   */
  read(options?: CallOptions): Promise<ClusterSnapshot>;
}

/** DI token for {@link ClusterSnapshotSource}. */
export const ClusterSnapshotSource = Symbol.for('confboot.ClusterSnapshotSource');
