/**
 * How the host and the in-VM agent talk: the host passes a JSON config as the QEMU fw_cfg file
 * `opt/confboot/config` (not secret: which step to run, nonces, addresses, expected measurements)
 * and the state disk's initial passphrase as the fw_cfg file `opt/confboot/initial-passphrase`
 * (the host keeps it to check, after the VM stopped, that it no longer opens the disk); the agent
 * answers on the VM's second serial port in lines `CONFBOOT-MINI <json>`, which QEMU writes to a
 * file on the host.
 */

/** Where QEMU's `-fw_cfg name=opt/confboot/config` appears in the guest (qemu_fw_cfg module). */
export const GUEST_CONFIG_PATH = '/sys/firmware/qemu_fw_cfg/by_name/opt/confboot/config/raw';
/** The fw_cfg name of the config. */
export const GUEST_CONFIG_FW_CFG = 'opt/confboot/config';
/** The fw_cfg name of the initial passphrase, and where it appears in the guest. */
export const INITIAL_PASSPHRASE_FW_CFG = 'opt/confboot/initial-passphrase';
export const INITIAL_PASSPHRASE_GUEST_PATH =
  '/sys/firmware/qemu_fw_cfg/by_name/opt/confboot/initial-passphrase/raw';
/** The report channel: the VM's second serial port. */
export const REPORT_PORT = '/dev/ttyS1';
/** Prefix of every report line. */
export const REPORT_PREFIX = 'CONFBOOT-MINI ';
/** Port of the simulated Kubernetes API server on the control-plane VM. */
export const SIMULATED_API_PORT = 6443;

/** The orders the host gives the agent. */
export type GuestConfig = AttestConfig | BootstrapConfig;

interface CommonConfig {
  /** The metadata server's root URL; when set the agent also reports what `/self` says. */
  metadataUrl?: string;
  /** The state disk to format (first boot), validate and map with dm-crypt, e.g. /dev/vda. */
  stateDisk?: string;
}

/**
 * Step `attest`: issue one qemu-vtpm document for the host, for this nonce (32 bytes, hex) and the
 * fixed evidence user data (evidence.ts); the host cannot choose the user data.
 */
export interface AttestConfig extends CommonConfig {
  step: 'attest';
  /** Hex nonce (32 bytes) the attestation binds. */
  nonce: string;
}

/** Step `bootstrap`: run `confboot bootstrapper`; a control plane then runs join and key service. */
export interface BootstrapConfig extends CommonConfig {
  step: 'bootstrap';
  role: 'control-plane' | 'worker';
  metadataUrl: string;
  stateDisk: string;
  /** Control plane: the join service's `--attestation-config` content. */
  attestationConfig?: unknown;
  /**
   * Control plane: the join service's `--qemu-ak-registry` content (hostname → the VM's reserved
   * address and registered AK).
   */
  akRegistry?: Record<string, { ip: string; attestationKeyPublic: string }>;
  /**
   * Hex nonce (32 bytes): before the bootstrapper starts, the agent reports one qemu-vtpm document
   * bound to it and to the fixed evidence user data, quoted through device:/dev/tpmrm0 and carrying
   * the firmware event log, so the host can replay that log against the quoted PCRs (the production
   * qemu-vtpm issuer carries no event log). No other quote is made for the host.
   */
  evidenceNonce?: string;
  /** Seconds between PCR 15 reports while the bootstrapper runs (default 10). */
  pcr15EverySeconds?: number;
  /**
   * Control plane of a cluster with several control planes: the load balancer's address, where the
   * host serves the simulated API server (guest/ha-kubelet.ts). The control plane runs no API server;
   * after its bootstrapper it starts the key and join service from what it reads through that API.
   */
  loadBalancer?: string;
  /**
   * Control-plane-0 of such a cluster: the host API server's public key (PEM, SPKI), for which the
   * simulated `kubeadm init` signs the serving certificate (the key stays on the host).
   */
  apiServerPublicKey?: string;
  /**
   * A marker to write to the mounted state disk once the bootstrapper succeeded (hex, at most 64
   * characters); every boot reports the marker it finds there.
   */
  marker?: string;
  /** Keep the VM running after the bootstrapper (a worker powers off by default). */
  stay?: boolean;
  /**
   * The SIMULATED kubeadm fails every run (the bootstrapper gets `--kubeadm /bin/false`): a join
   * fails after the node lock, so the bootstrapper marks the disk for reset and reboots the VM.
   */
  failKubeadm?: boolean;
  /**
   * Run the bootstrapper with `--verify-listen 0.0.0.0:8080`: after the node bootstrapped it
   * keeps running and serving the verification service; its outcome line counts as its exit. On a
   * control plane the node operator then re-attests the joined nodes (control-plane-api.ts).
   */
  verifyListen?: boolean;
  /** After the bootstrap, take the host's orders on {@link ORDERS_PORT} (only from the metadata server's address). */
  orders?: boolean;
}

/** The nodes' verification service port (upstream's). */
export const VERIFY_PORT = 8080;
/** Where the node operator on a control plane serves its metrics (`--metrics-listen`). */
export const OPERATOR_METRICS_PORT = 9090;
/** Where a node takes the host's orders (HTTP, testbed only). */
export const ORDERS_PORT = 9101;

/**
 * An order: `POST /extend-pcr` with this JSON body extends the PCR through /dev/tpmrm0
 * (`tpm2_pcrevent`: the SHA-256 of `data`) and answers {@link PcrExtended}.
 */
export interface ExtendPcrOrder {
  pcr: number;
  /** Hex bytes measured into the PCR. */
  data: string;
}

/** The answer to an {@link ExtendPcrOrder}: the register's SHA-256 value before and after. */
export interface PcrExtended {
  pcr: number;
  before: string;
  after: string;
}

/** Where the agent leaves {@link BootstrapConfig.apiServerPublicKey} for the simulated `kubeadm init`. */
export const API_SERVER_PUBLIC_KEY_PATH = '/run/confboot-apiserver.pub';

const KEYS: Record<GuestConfig['step'], string[]> = {
  attest: ['step', 'nonce', 'metadataUrl', 'stateDisk'],
  bootstrap: [
    'step',
    'role',
    'metadataUrl',
    'stateDisk',
    'attestationConfig',
    'akRegistry',
    'evidenceNonce',
    'pcr15EverySeconds',
    'loadBalancer',
    'apiServerPublicKey',
    'marker',
    'stay',
    'failKubeadm',
    'verifyListen',
    'orders',
  ],
};

/** Parses the host's config strictly: a known step, only that step's fields, nonces as 32-byte hex. */
export function parseGuestConfig(text: string): GuestConfig {
  const c = JSON.parse(text) as Record<string, unknown>;
  if (c === null || typeof c !== 'object' || Array.isArray(c)) throw new Error('the config is not an object');
  const step = c.step;
  if (step !== 'attest' && step !== 'bootstrap') throw new Error(`unknown step ${JSON.stringify(step)}`);
  const unknown = Object.keys(c).filter((k) => !KEYS[step].includes(k));
  if (unknown.length > 0) throw new Error(`the ${step} config has unknown fields: ${unknown.join(', ')}`);
  const nonce = step === 'attest' ? c.nonce : c.evidenceNonce;
  if (
    (step === 'attest' || nonce !== undefined) &&
    !(typeof nonce === 'string' && /^[0-9a-f]{64}$/.test(nonce))
  )
    throw new Error('the evidence nonce must be 32 bytes as lower-case hex');
  if (
    c.loadBalancer !== undefined &&
    !(typeof c.loadBalancer === 'string' && /^[0-9.]{7,15}$/.test(c.loadBalancer))
  )
    throw new Error('the load balancer must be an IPv4 address');
  if (
    c.apiServerPublicKey !== undefined &&
    !(
      typeof c.apiServerPublicKey === 'string' &&
      c.apiServerPublicKey.startsWith('-----BEGIN PUBLIC KEY-----')
    )
  )
    throw new Error('the API server public key must be a PEM public key');
  if (
    step === 'bootstrap' &&
    c.marker !== undefined &&
    !(typeof c.marker === 'string' && /^[0-9a-f]{1,64}$/.test(c.marker))
  )
    throw new Error('the marker must be at most 64 lower-case hex characters');
  if (step === 'bootstrap' && c.role !== 'control-plane' && c.role !== 'worker')
    throw new Error(`unknown role ${JSON.stringify(c.role)}`);
  return c as unknown as GuestConfig;
}
