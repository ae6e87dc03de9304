/** What `confboot demo` reports: each node's outcome and the proof checked after the run (`--json`). */
import type { JsonWebKeySet } from '../../adapters/receipts/receipt-key.js';
import type { KubeletClientCert } from '../simulated/node-records-state.js';

/**
 * Which keys open a node's state disk after the run (`cryptsetup open --test-passphrase`):
 * `issued-key` only the key the key service derives for the disk's UUID (the initial passphrase was
 * replaced), `initial-passphrase` only the initial passphrase (the disk was never taken over),
 * `both` or `neither` when something went wrong.
 */
export type DemoDiskState = 'issued-key' | 'initial-passphrase' | 'both' | 'neither';

/** One node's outcome, as printed in the summary and in `--json`. */
export interface DemoNodeResult {
  name: string;
  role: 'ControlPlane' | 'Worker';
  /** Boot as measured: `good` or `tampered`. */
  boot: 'good' | 'tampered';
  joined: boolean;
  /**
   * How it joined, or why it was refused: for a refusal the join service's audit record, which
   * names expected and actual values (`PCR12: expected …, got …`).
   */
  reason: string;
  /**
   * A refused node: the reason the join service's deny verdict gave the node itself, which names
   * the failed check and registers only (`measurements: PCR 12`), never a value.
   */
  toldNode?: string;
  /** Which keys open the state disk. */
  disk: DemoDiskState;
  /** `disk` is what the outcome requires: `issued-key` for a joined node, `initial-passphrase` for a refused one. */
  diskVerified: boolean;
  /** SHA-256 PCR 15 read from the node's TPM, hex. */
  pcr15: string;
  /** PCR 15 equals SHA256(0³² ‖ SHA256(clusterId)) for joined nodes and is zero for refused ones. */
  pcr15Verified: boolean;
  /**
   * The join service's signed receipt (JWT) as the join flow wrote it to the node's state disk
   * directory; verify it with `confboot receipt verify --jwks` and the result's `jwks`. Joined
   * workers only (the first control plane was initialised, not joined).
   */
  receipt?: string;
  /** The receipt verifies against the result's `jwks` and names this node (joined workers only). */
  receiptVerified?: boolean;
  /**
   * How its kubelet got its client certificate: a joined worker's through a CSR the node operator
   * approved (`{"via": "csr", "approvedBy": "AttestedJoinTicket"}`), the first control plane's from
   * init (`kubeadm-init`), a refused node none.
   */
  kubeletClientCert?: KubeletClientCert;
}

/** The demo's result (`--json`). */
export interface DemoResult {
  clusterId: string;
  durationMs: number;
  workDir: string | undefined;
  logFile: string | undefined;
  simulated: string[];
  /** The JWKS of the join service's receipt key (also served on its HTTP port while it runs). */
  jwks: JsonWebKeySet;
  /** JoiningNodes deleted by anyone but the node operator (nothing else deletes one: empty). */
  hostDeleted: string[];
  /** JoiningNodes the node operator deleted once their Node was Ready (`<record> (<node>)`). */
  operatorDeleted: string[];
  nodes: DemoNodeResult[];
}
