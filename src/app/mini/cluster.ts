/**
 * `confboot mini up` orchestration: real QEMU VMs (OVMF measured boot into a per-VM swtpm, the
 * node image from image.ts) on a private network in a namespace with dnsmasq and the metadata
 * server, running confboot's real flow:
 *
 * - every VM maps its LUKS2 state disk (disk-mapper) and runs the production
 *   `confboot bootstrapper --csp qemu --attestation-variant qemu-vtpm` (TCTI device:/dev/tpmrm0);
 * - the host runs `confboot init`'s code path inside the namespace against the control-plane VM:
 *   it verifies that VM's quote (expected measurements computed from the image and a reference
 *   boot, and the AK the host registered for the VM) before sending the master secret, then
 *   creates the master-secret Secret through the SIMULATED Kubernetes API server with the admin
 *   kubeconfig init returned (HTTPS verified against its cluster CA, its random admin token), and
 *   refuses unless its own creation won and reads back equal;
 * - the control-plane VM then runs the production `confboot key-service` and
 *   `confboot join-service` (qemu-vtpm, the same expected measurements, `--qemu-ak-registry`);
 *   workers find it through the metadata server and join on <control-plane IP>:30090; a tampered
 *   VM (another kernel command line, so PCR 9 differs) is refused by the join service;
 * - at the end every VM's outcome is checked from real state: the dm-crypt mapping and keyslots as
 *   the VM reports them, PCR 15 read from its TPM against SHA256(0^32 || SHA256(cluster ID)), and,
 *   after the VM stopped, the disk image on the host: the initial passphrase no longer opens it,
 *   the key derived (HKDF, the key service's derivation) for its UUID does.
 *
 * kubeadm and the Kubernetes API server are SIMULATED (guest/kubeadm-sim.ts,
 * adapters/simulated/simulated-kube-api.ts); the result says so.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import {
  parseEventLog,
  replayEventLog,
  type TcgEventLog,
} from '../../adapters/attestation/eventlog/tcg-log.js';
import { decodeVtpmDocument } from '../../adapters/attestation/shared/vtpm-document.js';
import { hashInitSecret } from '../../adapters/crypto/bcrypt-secret-hash.js';
import { HkdfKms } from '../../adapters/kms/hkdf-kms.js';
import { expectedPcr15 } from '../../adapters/tpm/pcr15-marker.js';
import {
  createPrivateNetwork,
  type NetworkSlot,
  type PrivateNetwork,
  sweepStaleNetworks,
} from '../../adapters/vm/private-network.js';
import { OVMF_CODE, OVMF_VARS, QemuVm } from '../../adapters/vm/qemu-vm.js';
import { run } from '../../adapters/vm/run.js';
import { STATE_DISK_KEY_LENGTH } from '../../domain/key-derivation.js';
import { JOIN_SERVICE_PORT } from '../defaults.js';
import { opensWithKey } from '../demo/state-disk.js';
import { bundleEntry } from './bundle.js';
import {
  type BootstrapConfig,
  GUEST_CONFIG_FW_CFG,
  INITIAL_PASSPHRASE_FW_CFG,
  REPORT_PREFIX,
} from './guest/protocol.js';
import type { InitEntryInput } from './host/init-entry.js';
import { buildNodeImage, defaultCacheDir, type NodeImage } from './image.js';
import { COMPUTED_PCRS, computedPcrs, REFERENCE_PCRS, referencePcrs } from './measurements.js';
import { provisionTpm } from './provision.js';

/**
 * The kernel command line of a good node. `no_timer_check`: on a loaded host a TCG guest can fail
 * the kernel's IO-APIC timer check and panic.
 */
export const NODE_CMDLINE = 'console=ttyS0 quiet panic=-1 no_timer_check';
/** A tampered node's command line: one extra parameter, so PCR 9 differs. */
export const TAMPERED_CMDLINE = `${NODE_CMDLINE} confboot.debug-shell=1`;
const METADATA_PORT = 8080;
const require = createRequire(import.meta.url);

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
  disk?: { uuid: string; cipher: string; mapping: string; formatted: boolean };
  /** The state disk as the VM saw it after the bootstrapper. */
  diskInVm?: { active: boolean; cipher: string | null; keyslots: number[]; initialPassphraseOpens: boolean };
  /** The disk image checked on the host after the VM stopped. */
  diskOnHost?: { opensWithInitialPassphrase: boolean; opensWithDerivedKey: boolean };
  /** PCR 15 read from the VM's TPM (last report) against SHA256(0^32 || SHA256(cluster ID)). */
  pcr15?: { actual: string | null; expected: string; matches: boolean; zero: boolean };
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
    error?: string;
  };
  /** What the simulated API server held at the end (reported by the control-plane VM). */
  apiServer?: { violations: string[]; joiningNodes: string[]; diskBindings: unknown[]; tokens: number };
  nodes: MiniNodeResult[];
  /** The network namespace the run used (removed at the end unless kept). */
  netns: string;
  workDir: string;
  durationMs: number;
  simulated: string[];
  ok: boolean;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** True when KVM boots a guest here (a probe boot of the image, 45 s at most). */
async function kvmWorks(image: NodeImage, dir: string, signal?: AbortSignal): Promise<boolean> {
  if (!existsSync('/dev/kvm')) return false;
  await mkdir(join(dir, 'tpm'), { recursive: true });
  const vm = new QemuVm({
    name: 'kvm-probe',
    workDir: dir,
    tpmStateDir: join(dir, 'tpm'),
    kernel: image.kernel,
    initrd: image.initrd,
    cmdline: NODE_CMDLINE,
    memoryMiB: 1024,
    accel: 'kvm',
  });
  try {
    await vm.start();
    await vm.waitForReport(REPORT_PREFIX, (r) => r.type === 'measured', {
      timeoutMs: 45_000,
      ...(signal ? { signal } : {}),
    });
    return true;
  } catch {
    return false;
  } finally {
    await vm.stop();
  }
}

/**
 * Records what the VM's own evidence shows: the TCTI its quote went through, whether the firmware
 * event log in the document replays to the quoted SHA-256 PCRs, and whether it is the log /init
 * reported before any node software ran.
 */
function checkEvidence(
  result: MiniNodeResult,
  document: Uint8Array,
  tcti: string,
  measured: Record<string, unknown>,
): void {
  const doc = decodeVtpmDocument(document);
  result.tcti = tcti;
  result.eventLogMatchesBootReport = Buffer.from(doc.attestation.eventLog).equals(
    Buffer.from(String(measured.eventLog), 'base64'),
  );
  const quoted = doc.attestation.quotes.find((q) => q.pcrHashAlg === 11)?.pcrs ?? new Map();
  const replayed = replayEventLog(parseEventLog(doc.attestation.eventLog)).get(11) ?? new Map();
  result.eventLogReplays =
    replayed.size > 0 && [...replayed].every(([p, v]) => quoted.has(p) && hex(quoted.get(p)) === hex(v));
}

function decodeLog(b64: unknown): TcgEventLog {
  if (typeof b64 !== 'string') throw new Error('report without an event log');
  return parseEventLog(Buffer.from(b64, 'base64'));
}

/** Removes what a run leaves besides its logs (TPM state, disks, bundles, firmware variables). */
async function pruneWorkDir(dir: string): Promise<void> {
  if (!existsSync(dir)) return;
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) await pruneWorkDir(p);
    else if (!entry.name.endsWith('.log') && !entry.name.endsWith('.json')) await rm(p, { force: true });
  }
  for (const entry of await readdir(dir, { withFileTypes: true }))
    if (entry.isDirectory() && (await readdir(join(dir, entry.name))).length === 0)
      await rm(join(dir, entry.name), { recursive: true });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Where a `--keep` run notes its work directory per namespace, for `mini down` (root's tmpfs). */
const KEPT_DIR = '/run/confboot-mini';

/** Prunes the work directory a `--keep` run noted for `netns` (secrets, disks, TPM state) and forgets it. */
async function forgetKept(netns: string): Promise<void> {
  const note = join(KEPT_DIR, netns);
  if (!existsSync(note)) return;
  await pruneWorkDir((await readFile(note, 'utf8')).trim());
  await rm(note, { force: true });
}

/** A join-service (or other pino) line forwarded by the control-plane VM, parsed. */
function pinoLine(r: Record<string, unknown>, source: string): Record<string, unknown> | undefined {
  if (r.type !== 'log' || r.source !== source || typeof r.line !== 'string') return undefined;
  try {
    const v = JSON.parse(r.line) as unknown;
    return v !== null && typeof v === 'object' ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Runs the init entry inside the namespace; resolves to its JSON outcome. */
function runInit(
  netns: string,
  bundle: string,
  input: InitEntryInput,
  logFile: string,
): Promise<MiniResult['init']> {
  return new Promise((resolve) => {
    // The bundle still resolves @grpc/grpc-js/package.json (grpc-js's version) at run time.
    const nodeModules = join(dirname(require.resolve('@grpc/grpc-js/package.json')), '..', '..');
    const child: ChildProcess = spawn('ip', ['netns', 'exec', netns, process.execPath, bundle], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, NODE_PATH: nodeModules },
    });
    let out = '';
    let err = '';
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr?.on('data', (c: Buffer) => {
      err += c.toString();
    });
    child.on('error', (e) => resolve({ ok: false, error: e.message }));
    child.on('close', () => {
      void writeFile(logFile, err).catch(() => {});
      const last = out.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(last) as MiniResult['init']);
      } catch {
        resolve({ ok: false, error: `init gave no result: ${err.trim().slice(-400)}` });
      }
    });
    child.stdin?.end(JSON.stringify(input));
  });
}

/** Runs the cluster; always cleans up VMs, swtpms, dnsmasq and the namespace unless `keep`. */
export async function miniUp(options: MiniUpOptions): Promise<MiniResult> {
  const started = Date.now();
  const progress = options.progress ?? (() => {});
  const memoryMiB = options.memoryMiB ?? 1024;
  const cacheDir = options.cacheDir ?? defaultCacheDir();
  if (process.getuid?.() !== 0)
    throw new Error('mini needs root (network namespaces, tap devices, dm-crypt in VMs)');
  const swept = await sweepStaleNetworks();
  for (const n of swept) await forgetKept(n);
  if (swept.length > 0)
    progress(`removed ${swept.length} namespace(s) left by an earlier run: ${swept.join(', ')}`);
  const workDir = options.workDir ?? (await mkdtemp(join(tmpdir(), 'confboot-mini-')));
  await mkdir(workDir, { recursive: true });
  const signalOpt = options.signal ? { signal: options.signal } : {};

  const vms: QemuVm[] = [];
  let net: PrivateNetwork | undefined;
  try {
    progress(
      'building the node image (Debian kernel; initramfs with busybox, node, tpm2-tools, cryptsetup, the confboot CLI)',
    );
    const image = await buildNodeImage({ cacheDir, log: progress });
    progress(
      `node image ${image.key.slice(0, 12)}: ${image.kernelPackage}, initrd sha256 ${image.initrdSha256.slice(0, 16)}…`,
    );

    let accel: 'kvm' | 'tcg' = options.accel === 'auto' ? 'tcg' : options.accel;
    if (options.accel === 'auto') {
      progress('probing KVM by booting the image (45 s at most)');
      accel = (await kvmWorks(image, join(workDir, 'kvm-probe'), options.signal)) ? 'kvm' : 'tcg';
      progress(`acceleration: ${accel}${accel === 'tcg' ? ' (KVM does not run guests here)' : ''}`);
    }
    const deadlineMs = options.nodeTimeoutMs ?? (accel === 'kvm' ? 300_000 : 900_000);

    const names: { name: string; role: 'control-plane' | 'worker'; boot: 'good' | 'tampered' }[] = [
      { name: 'control-plane-0', role: 'control-plane', boot: 'good' },
    ];
    for (let i = 0; i < options.workers + options.tampered; i++)
      names.push({ name: `worker-${i}`, role: 'worker', boot: i < options.workers ? 'good' : 'tampered' });

    // Reference values for the firmware PCRs, cached per firmware, QEMU and device layout.
    const qemuVersion = (await run('qemu-system-x86_64', ['--version'])).stdout.split('\n')[0] ?? '';
    const refKey = createHash('sha256')
      .update(await readFile(OVMF_CODE))
      .update(await readFile(OVMF_VARS))
      .update(
        `${qemuVersion}\0pc,${memoryMiB},tpm-tis,virtio-net,virtio-blk,2 serial,fw_cfg config\0${accel}`,
      )
      .digest('hex');
    const refFile = join(cacheDir, 'reference', `${refKey.slice(0, 24)}.json`);
    let reference: Map<number, Buffer> | undefined;
    let referenceSource = `reference boot cached in ${refFile}`;
    if (existsSync(refFile)) {
      const saved = JSON.parse(await readFile(refFile, 'utf8')) as { eventLog: string };
      reference = referencePcrs(decodeLog(saved.eventLog));
    }

    net = await createPrivateNetwork({ workDir });
    const network = net;
    const slots = new Map<string, NetworkSlot>();
    if (reference === undefined) slots.set('reference', await net.addSlot('reference'));
    for (const n of names) slots.set(n.name, await net.addSlot(n.name));
    await net.startDhcp();
    const metadataUrl = `http://${net.hostIp}:${METADATA_PORT}`;
    const metadataBundle = join(workDir, 'metadata-server.mjs');
    await writeFile(metadataBundle, await bundleEntry('host/metadata-entry'));
    const initSecret = randomBytes(32);
    // Each VM's registered AK and EK certificate, published per instance on /self/identity.
    const identitiesFile = join(workDir, 'identities.json');
    await writeFile(identitiesFile, '{}');
    net.spawnInside(
      process.execPath,
      [
        metadataBundle,
        '--leases',
        net.leasesFile,
        '--identities',
        identitiesFile,
        '--init-secret-hash',
        await hashInitSecret(initSecret),
        '--listen',
        `${net.hostIp}:${METADATA_PORT}`,
      ],
      join(workDir, 'metadata-server.log'),
    );
    progress(
      `private network ${net.netns}: bridge ${net.hostIp}/24, dnsmasq, metadata server on :${METADATA_PORT}`,
    );

    const initialPassphrases = new Map<string, Buffer>();
    const startVm = async (
      name: string,
      cmdline: string,
      config: BootstrapConfig | undefined,
      cpus = 1,
    ): Promise<QemuVm> => {
      const dir = join(workDir, name);
      await mkdir(dir, { recursive: true });
      const disk = join(dir, 'state.img');
      await writeFile(disk, new Uint8Array());
      await truncate(disk, 64 * 1024 * 1024);
      const configFile = join(dir, 'config.json');
      await writeFile(configFile, JSON.stringify(config ?? { step: 'probe' }));
      const passphrase = randomBytes(32);
      initialPassphrases.set(name, passphrase);
      const passphraseFile = join(dir, 'initial-passphrase.bin');
      await writeFile(passphraseFile, passphrase, { mode: 0o600 });
      const slot = slots.get(name) as NetworkSlot;
      const vm = new QemuVm({
        name,
        workDir: dir,
        tpmStateDir: join(dir, 'tpm'),
        kernel: image.kernel,
        initrd: image.initrd,
        cmdline,
        memoryMiB,
        accel,
        cpus,
        fwCfg: { [GUEST_CONFIG_FW_CFG]: configFile, [INITIAL_PASSPHRASE_FW_CFG]: passphraseFile },
        disks: [disk],
        nic: { tap: slot.tap, mac: slot.mac },
        netns: network.netns,
      });
      vms.push(vm);
      await vm.start();
      return vm;
    };

    if (reference === undefined) {
      progress('reference boot: booting once to record the firmware event log (PCRs 0–3, 5–7)');
      await mkdir(join(workDir, 'reference', 'tpm'), { recursive: true });
      const vm = await startVm('reference', NODE_CMDLINE, undefined);
      const r = await vm.waitForReport(REPORT_PREFIX, (x) => x.type === 'measured', {
        timeoutMs: deadlineMs,
        ...signalOpt,
      });
      await vm.stop();
      reference = referencePcrs(decodeLog(r.eventLog));
      await mkdir(join(cacheDir, 'reference'), { recursive: true });
      await writeFile(refFile, JSON.stringify({ qemuVersion, eventLog: r.eventLog }));
      referenceSource = `reference boot just now, cached in ${refFile}`;
    }
    const computed = await computedPcrs(image.kernel, image.initrd, NODE_CMDLINE, memoryMiB);
    // PCR 15 (the node lock) must still be zero: a node that already joined a cluster is refused.
    const expected = new Map<number, Buffer>([...reference, ...computed, [15, Buffer.alloc(32)]]);
    const attestationConfig = {
      measurements: Object.fromEntries(
        [...expected].map(([i, v]) => [String(i), { expected: hex(v), warnOnly: false }]),
      ),
    };
    await writeFile(join(workDir, 'attestationConfig.json'), JSON.stringify(attestationConfig, null, 2));

    // Provision every TPM (EK + certificate, AK) and register the AKs before any VM boots, each
    // with the VM's reserved address: the join service accepts an AK only from its VM's address.
    progress(`provisioning ${names.length} TPMs (EK certificate from swtpm_localca, AK persisted)`);
    const identities: Record<string, { ip: string; attestationKeyPublic: string; ekCertificate: string }> =
      {};
    await Promise.all(
      names.map(async (n) => {
        const p = await provisionTpm(join(workDir, n.name, 'tpm'));
        identities[n.name] = {
          ip: (slots.get(n.name) as NetworkSlot).ip,
          attestationKeyPublic: Buffer.from(p.akPub).toString('base64'),
          ekCertificate: Buffer.from(p.ekCertificate).toString('base64'),
        };
      }),
    );
    await writeFile(identitiesFile, JSON.stringify(identities));
    const akRegistry = Object.fromEntries(
      Object.entries(identities).map(([n, i]) => [
        n,
        { ip: i.ip, attestationKeyPublic: i.attestationKeyPublic },
      ]),
    );

    const results = new Map<string, MiniNodeResult>();
    const vmOf = new Map<string, QemuVm>();
    const t0 = Date.now();
    const say = (name: string, stage: MiniStage, extra = '') => {
      const r = results.get(name) as MiniNodeResult;
      r.stage = stage;
      progress(`${name.padEnd(16)} ${stage}${extra ? ` ${extra}` : ''}`);
    };
    for (const n of names) {
      const slot = slots.get(n.name) as NetworkSlot;
      results.set(n.name, {
        name: n.name,
        role: n.role,
        boot: n.boot,
        ip: slot.ip,
        stage: 'booting',
        accepted: false,
        reason: '',
        mismatches: [],
        consoleLog: join(workDir, n.name, 'console.log'),
        seconds: 0,
      });
      say(
        n.name,
        'booting',
        `(${n.boot === 'tampered' ? 'tampered: extra kernel parameter' : 'good'}, ${accel})`,
      );
      vmOf.set(
        n.name,
        await startVm(
          n.name,
          n.boot === 'good' ? NODE_CMDLINE : TAMPERED_CMDLINE,
          {
            step: 'bootstrap',
            role: n.role,
            evidenceNonce: randomBytes(32).toString('hex'),
            metadataUrl,
            stateDisk: '/dev/vda',
            ...(n.role === 'control-plane' ? { attestationConfig, akRegistry } : {}),
          },
          n.role === 'control-plane' ? (options.controlPlaneCpus ?? 1) : 1,
        ),
      );
    }
    const cp = names[0] as (typeof names)[number];
    const cpVm = vmOf.get(cp.name) as QemuVm;
    const cpIp = (slots.get(cp.name) as NetworkSlot).ip;
    const remaining = () => Math.max(1, deadlineMs - (Date.now() - t0));
    const waitReport = (vm: QemuVm, pick: (r: Record<string, unknown>) => boolean) =>
      vm.waitForReport(REPORT_PREFIX, (r) => pick(r) || r.type === 'error', {
        timeoutMs: remaining(),
        ...signalOpt,
      });
    const vmError = (vm: QemuVm) => vm.reports(REPORT_PREFIX).find((r) => r.type === 'error');

    /** Follows one VM through boot and the bootstrapper start. */
    const follow = async (n: (typeof names)[number]) => {
      const vm = vmOf.get(n.name) as QemuVm;
      const measured = await waitReport(vm, (r) => r.type === 'measured');
      if (measured.type === 'error') throw new Error(`in the VM: ${String(measured.message)}`);
      say(n.name, 'measured', `(event log ${decodeLog(measured.eventLog).events.length} events)`);
      const evidence = await waitReport(vm, (r) => r.type === 'attestation');
      if (evidence.type === 'error') throw new Error(`in the VM: ${String(evidence.message)}`);
      const res0 = results.get(n.name) as MiniNodeResult;
      checkEvidence(res0, Buffer.from(String(evidence.document), 'base64'), String(evidence.tcti), measured);
      say(
        n.name,
        'attesting',
        `(quote through ${res0.tcti}; event log ${res0.eventLogReplays ? 'replays to' : 'does NOT replay to'} the quoted PCRs)`,
      );
      await waitReport(vm, (r) => r.type === 'started-program' && r.source === 'bootstrapper');
      const error = vmError(vm);
      if (error) throw new Error(`in the VM: ${String(error.message)}`);
      const reports = vm.reports(REPORT_PREFIX);
      const disk = reports.find((r) => r.type === 'disk');
      const res = results.get(n.name) as MiniNodeResult;
      if (disk)
        res.disk = {
          uuid: String(disk.uuid),
          cipher: String(disk.cipher),
          mapping: String(disk.mapping),
          formatted: disk.formatted === true,
        };
      res.metadataSelf = reports.find((r) => r.type === 'metadata')?.self;
      say(
        n.name,
        'bootstrapping',
        `(confboot bootstrapper; ${res.disk ? `${res.disk.mapping} ${res.disk.cipher}` : 'no disk'})`,
      );
    };
    const fail = (name: string, err: unknown) => {
      const r = results.get(name) as MiniNodeResult;
      if (r.stage === 'failed') return;
      r.reason = (err as Error).message;
      say(name, 'failed', r.reason);
    };

    // The operator's init, from the host side of the bridge, once the control plane runs the bootstrapper.
    let init: MiniResult['init'];
    const initDone = (async () => {
      try {
        await follow(cp);
        const bundle = join(workDir, 'init.mjs');
        await writeFile(bundle, await bundleEntry('host/init-entry'));
        const masterSecret = randomBytes(32);
        const masterSalt = randomBytes(32);
        progress(`operator         confboot init → ${cpIp}:9000 (verifying the control plane's quote first)`);
        init = await runInit(
          network.netns,
          bundle,
          {
            endpoint: `${cpIp}:9000`,
            attestationConfig,
            node: { name: cp.name, attestationKeyPublic: identities[cp.name]?.attestationKeyPublic ?? '' },
            masterSecret: masterSecret.toString('base64'),
            masterSalt: masterSalt.toString('base64'),
            measurementSalt: randomBytes(32).toString('base64'),
            initSecret: initSecret.toString('base64'),
            timeoutMs: remaining(),
          },
          join(workDir, 'init.log'),
        );
        const r = results.get(cp.name) as MiniNodeResult;
        if (!init?.ok) {
          r.refusedBy = 'init';
          throw new Error(
            init?.clusterId === undefined
              ? `confboot init failed: ${init?.error ?? 'no outcome'}`
              : `init ran, but the master secret is not the operator's: ${init.error ?? 'no outcome'}`,
          );
        }
        progress(
          `operator         init done: cluster ID ${init.clusterId?.slice(0, 16)}…; master-secret Secret created over TLS (API server certificate verified against the cluster CA from init) and read back equal`,
        );
        r.accepted = true;
        r.reason =
          'initialised the cluster (the operator verified its quote before sending the master secret)';
        say(cp.name, 'initialized');
        return { masterSecret, masterSalt, clusterId: Buffer.from(init.clusterId ?? '', 'hex') };
      } catch (err) {
        fail(cp.name, err);
        return undefined;
      }
    })();

    /** A worker: joined (the bootstrapper exited 0), refused by the join service, or failed. */
    const worker = async (n: (typeof names)[number]) => {
      const vm = vmOf.get(n.name) as QemuVm;
      const r = results.get(n.name) as MiniNodeResult;
      const ip = r.ip;
      try {
        await follow(n);
        if (n.boot === 'good') {
          const exit = await waitReport(vm, (x) => x.type === 'bootstrapper-exit');
          if (exit.type === 'error' || exit.code !== 0)
            throw new Error(
              `bootstrapper ${exit.type === 'error' ? String(exit.message) : `exited ${String(exit.code)}`}`,
            );
          await waitReport(vm, (x) => x.type === 'pcr15' && x.when === 'after');
          r.accepted = true;
          r.reason = 'joined: the join service validated its quote and issued a ticket';
          say(n.name, 'joined');
          await vm.waitForExit(accel === 'kvm' ? 30_000 : 120_000);
          return;
        }
        // Tampered: wait for the join service's refusal of this address, then one more PCR 15 report.
        let refusal: Record<string, unknown> | undefined;
        while (refusal === undefined) {
          if (remaining() <= 1) throw new Error('the join service did not refuse it in time');
          if (options.signal?.aborted) throw new Error('stopped');
          refusal = cpVm
            .reports(REPORT_PREFIX)
            .map((x) => pinoLine(x, 'join-service'))
            .find(
              (l) =>
                l !== undefined &&
                l.outcome === 'refused' &&
                typeof l.peer === 'string' &&
                (l.peer === ip || l.peer.startsWith(`${ip}:`)),
            );
          if (vm.reports(REPORT_PREFIX).some((x) => x.type === 'bootstrapper-exit'))
            throw new Error('its bootstrapper finished: it was NOT refused');
          if (refusal === undefined) await sleep(1000);
        }
        const detail = String(refusal.detail ?? '');
        r.refusedBy = 'join-service';
        // The join service's audit line: "PCR9: expected <hex>, got <hex>" per mismatching PCR.
        for (const m of detail.matchAll(/PCR(\d+): expected ([0-9a-f]+), got ([0-9a-f]+|nothing)/g)) {
          const pcr = Number(m[1]);
          r.mismatches.push({
            pcr,
            expected: m[2] ?? '',
            actual: m[3] === 'nothing' ? null : (m[3] ?? null),
          });
        }
        r.reason = `refused by the join service (${String(refusal.reason)}): ${detail}`;
        const seen = vm.reports(REPORT_PREFIX).filter((x) => x.type === 'pcr15').length;
        await waitReport(
          vm,
          (x) =>
            x.type === 'pcr15' && vm.reports(REPORT_PREFIX).filter((y) => y.type === 'pcr15').length > seen,
        );
        say(
          n.name,
          'refused',
          r.mismatches
            .map(
              (m) =>
                `PCR ${m.pcr}: expected ${m.expected.slice(0, 16)}…, actual ${m.actual?.slice(0, 16) ?? 'none'}…`,
            )
            .join('; '),
        );
      } catch (err) {
        fail(n.name, err);
      }
    };

    const workersDone = Promise.all(names.slice(1).map(worker));
    const secrets = await initDone;
    if (secrets !== undefined) {
      try {
        await waitReport(cpVm, (x) => x.type === 'pcr15' && x.when === 'after');
        await waitReport(cpVm, (x) => x.type === 'started-program' && x.source === 'join-service');
        progress(
          `${cp.name.padEnd(16)} runs confboot key-service and confboot join-service (:${JOIN_SERVICE_PORT})`,
        );
      } catch (err) {
        fail(cp.name, err);
      }
    }
    await workersDone;
    // Give the control plane a moment to report the simulated API server's final state.
    await sleep(3000);

    // Stop every VM (with --keep all but the control plane, which keeps serving joins), then
    // check each disk image on the host (cryptsetup reads the running VM's image header too).
    await Promise.all(vms.filter((v) => !(options.keep && v === cpVm)).map((v) => v.stop()));
    const kms = secrets ? new HkdfKms(secrets.masterSecret, secrets.masterSalt) : undefined;
    const wantPcr15 = secrets ? hex(expectedPcr15(secrets.clusterId)) : undefined;
    for (const n of names) {
      const r = results.get(n.name) as MiniNodeResult;
      const vm = vmOf.get(n.name) as QemuVm;
      const reports = vm.reports(REPORT_PREFIX);
      const state = reports.find((x) => x.type === 'disk-state');
      if (state)
        r.diskInVm = {
          active: state.active === true,
          cipher: (state.cipher as string | null) ?? null,
          keyslots: (state.keyslots as number[]) ?? [],
          initialPassphraseOpens: state.initialPassphraseOpens === true,
        };
      const lastLine = reports
        .filter((x) => x.type === 'log' && x.source === 'bootstrapper' && typeof x.line === 'string')
        .map((x) => String(x.line))
        .filter((l) => l.startsWith('Node '))
        .pop();
      if (lastLine) r.bootstrapper = lastLine;
      const pcr = reports.filter((x) => x.type === 'pcr15' && typeof x.value === 'string').pop();
      const actual = pcr ? String(pcr.value) : null;
      if (wantPcr15 !== undefined)
        r.pcr15 = {
          actual,
          expected: wantPcr15,
          matches: actual === wantPcr15,
          zero: actual === '00'.repeat(32),
        };
      const image = join(workDir, n.name, 'state.img');
      if (existsSync(image) && r.disk) {
        r.diskOnHost = {
          opensWithInitialPassphrase: await opensWithKey(image, initialPassphrases.get(n.name) as Buffer),
          opensWithDerivedKey: kms
            ? await opensWithKey(
                image,
                await kms.getDataKey(r.disk.uuid.toLowerCase(), STATE_DISK_KEY_LENGTH),
              )
            : false,
        };
      }
      r.seconds = Math.round((Date.now() - t0) / 1000);
    }
    const apiReport = cpVm
      .reports(REPORT_PREFIX)
      .filter((x) => x.type === 'api-server' && Array.isArray(x.violations))
      .pop();
    const nodes = [...results.values()];
    const ok =
      init?.ok === true &&
      nodes.every((n) =>
        n.boot === 'good'
          ? n.accepted &&
            n.stage !== 'failed' &&
            n.diskInVm?.active === true &&
            n.diskInVm.initialPassphraseOpens === false &&
            n.diskOnHost?.opensWithDerivedKey === true &&
            n.diskOnHost.opensWithInitialPassphrase === false &&
            n.pcr15?.matches === true
          : n.stage === 'refused' &&
            n.refusedBy === 'join-service' &&
            n.mismatches.length > 0 &&
            n.mismatches.every((m) => m.expected === hex(expected.get(m.pcr) ?? Buffer.alloc(0))) &&
            n.diskOnHost?.opensWithInitialPassphrase === true &&
            n.diskOnHost.opensWithDerivedKey === false &&
            n.pcr15?.zero === true,
      ) &&
      (apiReport?.violations as unknown[] | undefined)?.length === 0;
    return {
      accel,
      image: { key: image.key, kernelPackage: image.kernelPackage, initrdSha256: image.initrdSha256 },
      measurements: {
        computedFromImage: Object.fromEntries(
          COMPUTED_PCRS.map((p) => [String(p), hex(computed.get(p) as Buffer)]),
        ),
        fromReferenceBoot: Object.fromEntries(
          REFERENCE_PCRS.map((p) => [String(p), hex((reference as Map<number, Buffer>).get(p) as Buffer)]),
        ),
        referenceSource,
      },
      ...(init === undefined ? {} : { init }),
      ...(apiReport === undefined
        ? {}
        : {
            apiServer: {
              violations: apiReport.violations as string[],
              joiningNodes: (apiReport.joiningNodes as string[]) ?? [],
              diskBindings: (apiReport.diskBindings as unknown[]) ?? [],
              tokens: Number(apiReport.tokens ?? 0),
            },
          }),
      nodes,
      netns: net.netns,
      workDir,
      durationMs: Date.now() - started,
      simulated: [
        'kubeadm (init generates the cluster CA and admin.conf for real; join checks its configuration; no Kubernetes runs)',
        'Kubernetes API server (a strict in-memory REST server on the control plane, port 6443, HTTPS with a serving certificate from the cluster CA, random admin token from the simulated kubeadm init)',
      ],
      ok,
    };
  } finally {
    if (!options.keep) {
      await Promise.all(vms.map((v) => v.stop()));
      await net?.destroy();
      await pruneWorkDir(workDir);
    } else {
      // Kept until `confboot mini down`: this process must not wait for them to exit.
      for (const v of vms) v.release();
      net?.release();
      if (net) {
        await mkdir(KEPT_DIR, { recursive: true });
        await writeFile(join(KEPT_DIR, net.netns), workDir);
      }
    }
  }
}

/**
 * `confboot mini down`: removes every mini namespace with everything in it (QEMU, dnsmasq, the
 * metadata server; each swtpm ends with its QEMU) and prunes a kept run's work directory to its logs.
 */
export async function miniDown(): Promise<string[]> {
  const { listMiniNamespaces, removeNamespace } = await import('../../adapters/vm/private-network.js');
  const names = (await listMiniNamespaces()).map((n) => n.name);
  for (const n of names) {
    await removeNamespace(n);
    await forgetKept(n);
  }
  return names;
}
