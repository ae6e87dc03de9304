/**
 * Plain data types shared by ports, domain and adapters. No behaviour lives here.
 * Names follow Constellation's (docs/upstream.md): role, VPC IP, join ticket, measurement salt.
 */

/** A node's role in the cluster. `Unknown` means metadata has not said yet. */
export type Role = 'Unknown' | 'ControlPlane' | 'Worker';

/** What a metadata API knows about one instance (upstream `metadata.InstanceMetadata`). */
export interface InstanceMetadata {
  /** Node name; empty while the cloud has not assigned one. */
  name: string;
  /** Cloud-specific ID, e.g. `gce://project/zone/name`. */
  providerId: string;
  /**
   * The cloud's immutable instance ID, never reused for another instance: GCP's numeric instance
   * id, AWS's `i-…`, Azure's vmId, OpenStack's server UUID. Absent where the cloud has none (QEMU).
   */
  instanceId?: string;
  role: Role;
  /** Private IP in the cluster network; empty if unknown. */
  vpcIp: string;
  /** Secondary IP range of the subnetwork, if the cloud has one. */
  secondaryIpRange?: string;
  /** Alias IP ranges of the instance, if any. */
  aliasIpRanges?: string[];
}

/** A host and port, e.g. the Kubernetes API load balancer. */
export interface Endpoint {
  host: string;
  port: string;
}

/** A Kubernetes component to install (proto `components.Component`). */
export interface Component {
  url: string;
  /** `<algo>:<hex>` */
  hash: string;
  installPath: string;
  extract: boolean;
}

/** One file for `/etc/kubernetes/pki/<name>` (proto `control_plane_cert_or_key`). */
export interface ControlPlaneFile {
  /** Name relative to the pki directory, e.g. `etcd/ca.key`. */
  name: string;
  data: Uint8Array;
}

/** Persistent node state: the role and the measurement salt. */
export interface NodeState {
  role: Role;
  /** 32 bytes, persisted on the state disk. */
  measurementSalt: Uint8Array;
}

/** Request for a join ticket (proto `IssueJoinTicketRequest`). */
export interface JoinTicketRequest {
  diskUuid: string;
  /** DER-encoded PKCS#10 CSR for the kubelet client certificate. */
  certificateRequest: Uint8Array;
  isControlPlane: boolean;
  /** SSH host public key in wire format; empty when emergency SSH is not used. */
  hostPublicKey: Uint8Array;
  hostCertificatePrincipals: string[];
}

/** The join ticket (proto `IssueJoinTicketResponse`). Every byte field is secret except kubeletCert. */
export interface JoinTicket {
  stateDiskKey: Uint8Array;
  measurementSalt: Uint8Array;
  measurementSecret: Uint8Array;
  /** PEM `CERTIFICATE`. */
  kubeletCert: Uint8Array;
  /** `<ip>:6443` */
  apiServerEndpoint: string;
  /** kubeadm bootstrap token `[a-z0-9]{6}.[a-z0-9]{16}`. */
  token: string;
  /** `sha256:<hex>` */
  discoveryTokenCaCertHash: string;
  controlPlaneFiles: ControlPlaneFile[];
  /** Never set by the server (as upstream). */
  kubernetesVersion: string;
  kubernetesComponents: Component[];
  authorizedCaPublicKey: Uint8Array;
  hostCertificate: Uint8Array;
  /**
   * The join service's signed receipt of this join: a compact JWT (ES256) in the EAT Attestation
   * Result format (docs/attestation-config.md, "Join receipts"). Not a secret. Absent when the
   * service signs no receipts.
   */
  receipt?: string;
}

/** Request for a rejoin ticket (proto `IssueRejoinTicketRequest`). */
export interface RejoinTicketRequest {
  diskUuid: string;
}

/** The rejoin ticket (proto `IssueRejoinTicketResponse`). */
export interface RejoinTicket {
  stateDiskKey: Uint8Array;
  measurementSecret: Uint8Array;
  /** The join service's signed receipt of this rejoin (see {@link JoinTicket.receipt}). */
  receipt?: string;
}

/** The init request as the domain sees it (proto `InitRequest`). */
export interface InitRequest {
  kmsUri: string;
  storageUri: string;
  measurementSalt: Uint8Array;
  kubernetesVersion: string;
  conformanceMode: boolean;
  kubernetesComponents: Component[];
  initSecret: Uint8Array;
  clusterName: string;
  apiserverCertSans: string[];
  serviceCidr: string;
}

/** A successful init (proto `InitSuccessResponse`). */
export interface InitResult {
  kubeconfig: Uint8Array;
  clusterId: Uint8Array;
}

/** One expected measurement: a value, enforced or only warned about. */
export interface Measurement {
  /** 32 bytes (PCR) or 48 bytes (TDX). */
  expected: Uint8Array;
  /** A mismatch is reported but does not fail validation. */
  warnOnly: boolean;
}

/** Expected measurements by index. */
export type Measurements = Map<number, Measurement>;

/** One measurement that differs from what was expected. `actual` is undefined when missing. */
export interface MeasurementMismatch {
  index: number;
  expected: Uint8Array;
  actual: Uint8Array | undefined;
  warnOnly: boolean;
}

/** One check a validator performed, for operators and the `attestation verify` CLI. */
export interface AttestationCheck {
  /** Stable short name, e.g. `quote-signature`, `extra-data`, `pcr-digest`. */
  name: string;
  ok: boolean;
  /** Human-readable detail; never secret. */
  detail?: string;
}

/** Per-call options, last parameter of long-running port methods. */
export interface CallOptions {
  signal?: AbortSignal;
  timeoutInMs?: number;
  /**
   * The IP address of the remote end of the connection this call serves, when there is one: the
   * attested TLS server passes the caller's source address to `Validator.validate`, so a validator
   * can look up what is registered for the calling machine.
   */
  peerAddress?: string;
}
