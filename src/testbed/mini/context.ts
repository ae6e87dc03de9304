/**
 * The shared state of one mini run ({@link MiniCluster}): where it works, the node image and the
 * acceleration, the private network with its slots and metadata server, the expected measurements,
 * each node's result, and the node VMs. A node keeps its state disk image and its swtpm state
 * across boots, so a scenario can stop, start and reboot one node (another kernel command line or
 * guest config per boot) the way a cloud restarts an instance. Stages (stages/*.ts) read and fill
 * it; {@link MiniCluster.teardown} ends everything it started and waits until each process and the
 * namespace are gone.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type NetworkSlot, type PrivateNetwork, sweepStaleNetworks } from '../vm/private-network.js';
import { QemuVm } from '../vm/qemu-vm.js';
import {
  GUEST_CONFIG_FW_CFG,
  type GuestConfig,
  INITIAL_PASSPHRASE_FW_CFG,
  REPORT_PREFIX,
} from './guest/protocol.js';
import { defaultCacheDir, type NodeImage } from './image.js';
import {
  forgetKept,
  keepRun,
  namespacePids,
  pruneWorkDir,
  type TrackedProcess,
  trackProcess,
  waitGone,
} from './teardown.js';
import type { MiniNodeResult, MiniNodeSpec, MiniStage, MiniUpOptions } from './types.js';

/** Size of a node's state disk image: LUKS2's 16 MiB header and 16 MiB of data. */
export const STATE_DISK_BYTES = 32 * 1024 * 1024;

/** The expected measurements of a run (stages/measurements.ts). */
export interface MiniMeasurements {
  /** Firmware PCRs from a reference boot's event log. */
  reference: Map<number, Buffer>;
  referenceSource: string;
  /** PCRs computed from the image (kernel, initrd, command line). */
  computed: Map<number, Buffer>;
  /** Everything the policy expects, PCR 15 zero included. */
  expected: Map<number, Buffer>;
  /** The join service's and init's attestation config. */
  attestationConfig: { measurements: Record<string, { expected: string; warnOnly: boolean }> };
}

/** One registered VM identity, as the metadata server publishes it on /self/identity. */
export interface MiniIdentity {
  ip: string;
  attestationKeyPublic: string;
  ekCertificate: string;
}

/** How to boot a node once (see {@link MiniCluster.startNode}). */
export interface MiniBoot {
  cmdline: string;
  config: GuestConfig | undefined;
  cpus?: number;
}

/** One mini run; see the module comment. */
export class MiniCluster {
  readonly started = Date.now();
  readonly progress: (line: string) => void;
  readonly memoryMiB: number;
  readonly cacheDir: string;
  readonly signalOpt: { signal?: AbortSignal };
  image!: NodeImage;
  accel: 'kvm' | 'tcg' = 'tcg';
  /** Bound of the node waits after the VMs started (see {@link remaining}). */
  deadlineMs = 900_000;
  /** When the fleet started booting. */
  t0 = Date.now();
  net: PrivateNetwork | undefined;
  readonly slots = new Map<string, NetworkSlot>();
  metadataUrl = '';
  identitiesFile = '';
  readonly initSecret = randomBytes(32);
  readonly identities: Record<string, MiniIdentity> = {};
  measurements: MiniMeasurements | undefined;
  readonly results = new Map<string, MiniNodeResult>();
  /** The initial passphrase the host gave each node's first boot (fw_cfg). */
  readonly initialPassphrases = new Map<string, Buffer>();
  readonly #vms = new Map<string, QemuVm>();
  readonly #allVms: QemuVm[] = [];
  readonly #boots = new Map<string, number>();
  readonly #tracked: TrackedProcess[] = [];

  private constructor(
    readonly options: MiniUpOptions,
    readonly nodes: MiniNodeSpec[],
    readonly workDir: string,
  ) {
    this.progress = options.progress ?? (() => {});
    this.memoryMiB = options.memoryMiB ?? 1024;
    this.cacheDir = options.cacheDir ?? defaultCacheDir();
    this.signalOpt = options.signal ? { signal: options.signal } : {};
  }

  /** Checks for root, removes what crashed runs left, and makes the work directory. */
  static async open(options: MiniUpOptions, nodes: MiniNodeSpec[]): Promise<MiniCluster> {
    if (process.getuid?.() !== 0)
      throw new Error('mini needs root (network namespaces, tap devices, dm-crypt in VMs)');
    const progress = options.progress ?? (() => {});
    const swept = await sweepStaleNetworks();
    for (const n of swept) await forgetKept(n);
    if (swept.length > 0)
      progress(`removed ${swept.length} namespace(s) left by an earlier run: ${swept.join(', ')}`);
    const workDir = options.workDir ?? (await mkdtemp(join(tmpdir(), 'confboot-mini-')));
    await mkdir(workDir, { recursive: true });
    return new MiniCluster(options, nodes, workDir);
  }

  /** The network (after the network stage). */
  get network(): PrivateNetwork {
    if (this.net === undefined) throw new Error('mini: the network stage has not run');
    return this.net;
  }

  /** The expected measurements (after the measurement stage). */
  get expected(): MiniMeasurements {
    if (this.measurements === undefined) throw new Error('mini: the measurement stage has not run');
    return this.measurements;
  }

  /** The spec of node `name`. */
  node(name: string): MiniNodeSpec {
    const n = this.nodes.find((x) => x.name === name);
    if (n === undefined) throw new Error(`mini: no node ${name}`);
    return n;
  }

  /** The control-plane node (the first one). */
  get controlPlane(): MiniNodeSpec {
    return this.nodes[0] as MiniNodeSpec;
  }

  /** The result record of node `name`. */
  result(name: string): MiniNodeResult {
    const r = this.results.get(name);
    if (r === undefined) throw new Error(`mini: no result for ${name}`);
    return r;
  }

  /** The VM of node `name`'s current (or last) boot. */
  vm(name: string): QemuVm {
    const vm = this.#vms.get(name);
    if (vm === undefined) throw new Error(`mini: ${name} never booted`);
    return vm;
  }

  /** How many times node `name` booted. */
  boots(name: string): number {
    return this.#boots.get(name) ?? 0;
  }

  /** The node's own directory: state disk image, TPM state, first boot's logs. */
  nodeDir(name: string): string {
    return join(this.workDir, name);
  }

  /** The node's state disk image on the host. */
  diskImage(name: string): string {
    return join(this.nodeDir(name), 'state.img');
  }

  /**
   * Boots node `name` (which must not run). The first boot creates its 32 MiB state disk and
   * initial passphrase; later boots keep the disk and the TPM state, and log into `boot-N`.
   */
  async startNode(name: string, boot: MiniBoot): Promise<QemuVm> {
    if (this.#vms.get(name)?.running) throw new Error(`mini: ${name} is running`);
    const n = (this.#boots.get(name) ?? 0) + 1;
    this.#boots.set(name, n);
    const home = this.nodeDir(name);
    const dir = n === 1 ? home : join(home, `boot-${n}`);
    await mkdir(dir, { recursive: true });
    await mkdir(join(home, 'tpm'), { recursive: true });
    const disk = this.diskImage(name);
    if (!existsSync(disk)) {
      await writeFile(disk, new Uint8Array());
      // 16 MiB of LUKS2 header and 16 MiB of data: formatting with integrity writes every data
      // sector's tag, in software under TCG, so a smaller disk boots sooner; the node keeps kilobytes.
      await truncate(disk, STATE_DISK_BYTES);
    }
    const passphraseFile = join(home, 'initial-passphrase.bin');
    if (!this.initialPassphrases.has(name)) {
      const passphrase = randomBytes(32);
      this.initialPassphrases.set(name, passphrase);
      await writeFile(passphraseFile, passphrase, { mode: 0o600 });
    }
    const configFile = join(dir, 'config.json');
    await writeFile(configFile, JSON.stringify(boot.config ?? { step: 'probe' }));
    const slot = this.slots.get(name);
    if (slot === undefined) throw new Error(`mini: ${name} has no network slot`);
    const vm = new QemuVm({
      name,
      workDir: dir,
      tpmStateDir: join(home, 'tpm'),
      kernel: this.image.kernel,
      initrd: this.image.initrd,
      cmdline: boot.cmdline,
      memoryMiB: this.memoryMiB,
      accel: this.accel,
      cpus: boot.cpus ?? 1,
      fwCfg: { [GUEST_CONFIG_FW_CFG]: configFile, [INITIAL_PASSPHRASE_FW_CFG]: passphraseFile },
      disks: [disk],
      nic: { tap: slot.tap, mac: slot.mac },
      netns: this.network.netns,
    });
    this.#vms.set(name, vm);
    this.#allVms.push(vm);
    try {
      await vm.start();
    } finally {
      this.trackPids(vm);
    }
    return vm;
  }

  /** Powers node `name` off (QEMU and its swtpm end); its disk and TPM state stay. */
  async stopNode(name: string): Promise<void> {
    await this.#vms.get(name)?.stop();
  }

  /** Powers every node off but `except` (with `keep`, the control plane keeps serving). */
  async stopAll(except?: string): Promise<void> {
    await Promise.all([...this.#vms].filter(([name]) => name !== except).map(([, vm]) => vm.stop()));
  }

  /** Stops node `name` and boots it again with `boot` (same disk, same TPM). */
  async rebootNode(name: string, boot: MiniBoot): Promise<QemuVm> {
    await this.stopNode(name);
    return this.startNode(name, boot);
  }

  /** Remembers a started process so teardown can check it is gone. */
  track(pid: number | undefined, what: string): void {
    if (pid !== undefined) this.#tracked.push(trackProcess(pid, what));
  }

  private trackPids(vm: QemuVm): void {
    const p = vm.pids();
    this.track(p.qemu, `qemu ${vm.spec.name}`);
    this.track(p.swtpm, `swtpm ${vm.spec.name}`);
  }

  /** Time left of the run's node deadline (at least 1 ms). */
  remaining(): number {
    return Math.max(1, this.deadlineMs - (Date.now() - this.t0));
  }

  /** The first report of `vm` that `pick` takes, or its first error report; bounded by {@link remaining}. */
  waitReport(vm: QemuVm, pick: (r: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
    return vm.waitForReport(REPORT_PREFIX, (r) => pick(r) || r.type === 'error', {
      timeoutMs: this.remaining(),
      ...this.signalOpt,
    });
  }

  /** Every report of node `name`'s current boot. */
  reports(name: string): Record<string, unknown>[] {
    return this.vm(name).reports(REPORT_PREFIX);
  }

  /** Sets node `name`'s stage and prints a progress line. */
  say(name: string, stage: MiniStage, extra = ''): void {
    this.result(name).stage = stage;
    this.progress(`${name.padEnd(16)} ${stage}${extra ? ` ${extra}` : ''}`);
  }

  /** Marks node `name` failed with `err`'s message (once). */
  fail(name: string, err: unknown): void {
    const r = this.result(name);
    if (r.stage === 'failed') return;
    r.reason = (err as Error).message;
    this.say(name, 'failed', r.reason);
  }

  /** Throws when the run was stopped. */
  checkStopped(): void {
    if (this.options.signal?.aborted) throw new Error('stopped');
  }

  /**
   * Ends every VM, swtpm, dnsmasq and process in the namespace, deletes the namespace and prunes
   * the work directory to its logs, then waits (bounded) until each process it started and the
   * namespace are gone; returns what is still there (empty when clean). With `keep` it leaves what
   * still runs for `mini down` and returns [].
   */
  async teardown(keep: boolean): Promise<string[]> {
    if (keep) {
      for (const v of this.#allVms) v.release();
      this.net?.release();
      if (this.net) await keepRun(this.net.netns, this.workDir);
      return [];
    }
    await Promise.all(this.#allVms.map((v) => v.stop()));
    if (this.net)
      for (const pid of await namespacePids(this.net.netns))
        this.track(pid, `pid ${pid} in ${this.net.netns}`);
    await this.net?.destroy();
    const leftovers = await waitGone(this.#tracked, this.net?.netns, 30_000);
    await pruneWorkDir(this.workDir);
    return leftovers;
  }
}
