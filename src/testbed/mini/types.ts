/**
 * The data of a mini run: the nodes' kernel command lines, the options of `mini up`, and what a run
 * reports per VM and as a whole. Stages (stages/*.ts) fill these in; cluster.ts composes them.
 */
/**
 * The kernel command line of a good node. `no_timer_check`: on a loaded host a TCG guest can fail
 * the kernel's IO-APIC timer check and panic.
 */
export const NODE_CMDLINE = 'console=ttyS0 quiet panic=-1 no_timer_check';
/** A tampered node's command line: one extra parameter, so PCR 9 differs. */
export const TAMPERED_CMDLINE = `${NODE_CMDLINE} confboot.debug-shell=1`;

/** Options of {@link miniUp}. */
export interface MiniUpOptions {
  workers: number;
  tampered: number;
  accel: 'auto' | 'kvm' | 'tcg';
  keep?: boolean;
  cacheDir?: string;
  workDir?: string;
  memoryMiB?: number;
  /** Virtual CPUs of the control-plane VM (default 1: with 2, OVMF measures another PCR 0, so the reference boot would not fit). */
  controlPlaneCpus?: number;
  /**
   * The host's bridge address is the cluster's load balancer: the metadata server answers it on
   * `/endpoint` (several control planes, src/testbed/mini/ha.ts). Default: control-plane-0's address.
   */
  loadBalancer?: boolean;
  /** Deadline of the whole run after the VMs started, default 900 s under TCG and 300 s under KVM. */
  nodeTimeoutMs?: number;
  progress?: (line: string) => void;
  signal?: AbortSignal;
}

/** One PCR that differs from what the policy expects. */
export interface PcrMismatch {
  pcr: number;
  expected: string;
  actual: string | null;
}

/** Stages a VM goes through, in order; `refused` and `failed` end it early. */
export type MiniStage =
  | 'booting'
  | 'measured'
  | 'attesting'
  | 'bootstrapping'
  | 'initialized'
  | 'joined'
  | 'refused'
  | 'failed';

/** One VM's outcome. */
export interface MiniNodeResult {
  name: string;
  role: 'control-plane' | 'worker';
  boot: 'good' | 'tampered';
  ip: string;
  stage: MiniStage;
  /** Initialised (control plane) or joined (worker). */
  accepted: boolean;
  reason: string;
  /** Who refused it (`init`: the operator's init; `join-service`: the join service). */
  refusedBy?: 'init' | 'join-service';
  /** The PCRs that differ: expected (the policy) and actual (what the refusing side saw). */
  mismatches: PcrMismatch[];
  /** The bootstrapper's own last line ("Node joined the cluster (cluster ID …)"). */
  bootstrapper?: string;
  /** What the metadata server told the VM about itself. */
  metadataSelf?: unknown;
  /** TCTI of the quote the VM made for the host before its bootstrapper started. */
  tcti?: string;
  /** That quote's event log (the firmware's) replays to its quoted SHA-256 PCRs. */
  eventLogReplays?: boolean;
  /** That event log equals the one /init sent before any node software ran. */
  eventLogMatchesBootReport?: boolean;
  /** The disk-mapper's result (LUKS2 formatted and mapped with dm-crypt in the VM). */
  disk?: { uuid: string; cipher: string; integrity: string; mapping: string; formatted: boolean };
  /** The state disk as the VM saw it after the bootstrapper. */
  diskInVm?: {
    active: boolean;
    cipher: string | null;
    /** The mapping's integrity, e.g. `hmac(sha256)` (authenticated encryption); `none` without. */
    integrity: string | null;
    keyslots: number[];
    initialPassphraseOpens: boolean;
  };
  /** The disk image checked on the host after the VM stopped. */
  diskOnHost?: { opensWithInitialPassphrase: boolean; opensWithDerivedKey: boolean };
  /** PCR 15 read from the VM's TPM (last report) against SHA256(0^32 || SHA256(cluster ID)). */
  pcr15?: { actual: string | null; expected: string; matches: boolean; zero: boolean };
  /**
   * How its kubelet got its client certificate: `kubeadm-init` (the first control plane), or `csr`
   * with the Approved condition's reason (`AttestedJoinTicket`: the node operator) and the CSR's
   * name; `none` when no signed CSR names it.
   */
  kubeletClientCert?: { via: 'kubeadm-init' | 'csr' | 'none'; approvedBy: string | null; csr?: string };
  consoleLog: string;
  seconds: number;
}

/** The run's outcome. */
export interface MiniResult {
  accel: 'kvm' | 'tcg';
  image: { key: string; kernelPackage: string; initrdSha256: string };
  measurements: {
    computedFromImage: Record<string, string>;
    fromReferenceBoot: Record<string, string>;
    referenceSource: string;
  };
  /** The operator's init against the control plane (host side of the bridge). */
  init?: {
    ok: boolean;
    clusterId?: string;
    attestationChecks?: string[];
    attempts?: number;
    /** The master-secret Secret was created by this run (not found existing) and read back equal. */
    masterSecretStored?: boolean;
    /** With several control planes: each object init's bring-up applied, and what it did. */
    applied?: Array<{ kind: string; name: string; action: string }>;
    error?: string;
  };
  /**
   * `confboot status -o json` against the cluster (the SIMULATED API server, through the admin
   * kubeconfig from init) once the nodes joined: its envelope, or why it could not run.
   */
  status?: unknown;
  /** What the simulated API server held at the end (reported by the control-plane VM). */
  apiServer?: { violations: string[]; joiningNodes: string[]; diskBindings: unknown[]; tokens: number };
  /** JoiningNodes deleted by anyone but the node operator (the host deletes none). */
  hostDeleted?: string[];
  /** JoiningNodes the node operator deleted (`<record> (<node>)`). */
  operatorDeleted?: string[];
  nodes: MiniNodeResult[];
  /** The network namespace the run used (removed at the end unless kept). */
  netns: string;
  workDir: string;
  durationMs: number;
  simulated: string[];
  /**
   * What the teardown found after waiting for everything it started to end (VMs, swtpm, dnsmasq,
   * the metadata server, the namespace): empty when nothing was left. Absent with `keep`.
   */
  leftovers?: string[];
  ok: boolean;
}

/** One VM of a mini cluster, as planned before anything starts. */
export interface MiniNodeSpec {
  name: string;
  role: 'control-plane' | 'worker';
  boot: 'good' | 'tampered';
}

/** The nodes of `mini up`: control-plane-0, then `workers` good and `tampered` tampered workers. */
export function planNodes(workers: number, tampered: number): MiniNodeSpec[] {
  const nodes: MiniNodeSpec[] = [{ name: 'control-plane-0', role: 'control-plane', boot: 'good' }];
  for (let i = 0; i < workers + tampered; i++)
    nodes.push({ name: `worker-${i}`, role: 'worker', boot: i < workers ? 'good' : 'tampered' });
  return nodes;
}

/** Options of `mini lifecycle` (always a control plane and two good workers). */
export type MiniLifecycleOptions = Omit<MiniUpOptions, 'workers' | 'tampered' | 'keep'>;

/** A join service audit record about one node (rpc, outcome, reason, the disk it named). */
export interface AuditRecord {
  rpc: string;
  outcome: string;
  reason: string;
  diskUuid?: string;
  /** Stale disk bindings a fresh join released (lower-case UUIDs). */
  releasedDisks?: string[];
}

/** One step of `mini lifecycle` on one node, checked from real state. */
export interface LifecycleStepResult {
  step: 'form' | 'refused-join' | 'reattest' | 'tampered-reboot' | 'outage' | 'reset' | 'tampered-disk';
  node: string;
  ok: boolean;
  /** The node opened its state disk with a rejoin ticket (not a fresh join). */
  rejoined?: boolean;
  /** The control plane opened its state disk with the share holders' shares. */
  recovered?: boolean;
  /** The marker written to its mounted state disk at formation reads back equal. */
  markerIntact?: boolean;
  /** PCR 15 read from its TPM through /dev/tpmrm0: the cluster's marker, zero, or something else. */
  pcr15?: 'cluster-marker' | 'zero' | 'other' | 'unread';
  /** The dm-crypt mapping of its state disk exists (as the VM reports it). */
  diskOpen?: boolean;
  /** What the step showed, or why it did not hold. */
  reason: string;
  /** The join service's audit records about this node during the step. */
  audit?: AuditRecord[];
  /** The PCRs a refusal named. */
  mismatches?: PcrMismatch[];
  /** Each share holder's answer (outage, control plane). */
  recovery?: { holder: string; ok: boolean; recovered: boolean; answer: string }[];
  /** The kernel's console line that showed the step (tampered-disk: dm-crypt's AEAD error). */
  kernel?: string;
  /** LUKS UUID of the state disk before and after the step (reset). */
  diskUuid?: { before?: string; after?: string };
  /**
   * Reset: whether the old disk's binding was released (named in the fresh join's audit event and
   * gone from the API server's DiskBindings, where the new disk's binding is).
   */
  oldBindingReleased?: boolean;
  /**
   * Reboot: the SIMULATED kubelet restart the bootstrapper ran (on by default): whether it found the
   * state disk mounted and the kubelet credentials of the first join on it.
   */
  kubeletRestart?: { stateMounted: boolean; kubeletCredentials: boolean };
  /**
   * Reset: the boot before, in which kubeadm failed after the node lock: the bootstrapper asked for
   * the reboot (the VM ended by itself, no bootstrapper exit reported) with the disk marked for reset
   * (read by the host from the header afterwards, under the LUKS UUID that boot formatted).
   */
  failedJoin?: { rebootRequested: boolean; vmEndedItself: boolean; headerReset: boolean; diskUuid?: string };
  /** The bootstrapper's last line this boot. */
  bootstrapper?: string;
  /** Reattest: what the node operator, its metrics and `confboot verify` showed (host/reattest-entry.ts). */
  reattestation?: Omit<import('./host/reattest-entry.js').ReattestEntryOutput, 'ok' | 'error'>;
  seconds: number;
}

/** The outcome of `mini lifecycle`. */
export interface MiniLifecycleResult {
  accel: 'kvm' | 'tcg';
  clusterId?: string;
  recoveryShares: { total: number; threshold: number };
  /**
   * The cluster's formation as `mini up` reports it: init's outcome, PCR 9 as computed from the
   * image, and every node's first-boot evidence (the tampered worker's after it was powered off).
   */
  formation?: {
    init?: MiniResult['init'];
    computedFromImage: Record<string, string>;
    nodes: MiniNodeResult[];
  };
  /** Each node's state-disk integrity as its VM read the validated LUKS2 header (e.g. `hmac(sha256)`). */
  diskIntegrity: Record<string, string | null>;
  steps: LifecycleStepResult[];
  netns: string;
  workDir: string;
  durationMs: number;
  simulated: string[];
  /** What teardown found still running after waiting (empty when nothing was left). */
  leftovers?: string[];
  ok: boolean;
}
