/**
 * `confboot mini up` orchestration: real QEMU VMs (OVMF measured boot into a per-VM swtpm, the
 * node image from image.ts) on a private network in a namespace with dnsmasq and the metadata
 * server, a disk-mapper step in every VM, and every VM's qemu-vtpm attestation (quoted through
 * /dev/tpmrm0 with the AK the host provisioned and registered for that VM) checked on the host against measurements computed from the image (PCR 4, 9) and
 * taken from a reference boot's event log (PCRs 0–3, 5–7). Tampered VMs boot with a different
 * kernel command line and must be refused with expected vs actual.
 *
 * Not yet here (see docs/mini.md): the bootstrapper, join service and key service inside the VMs,
 * `confboot init` over the bridge, the issued disk key and PCR 15.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  parseEventLog,
  replayEventLog,
  type TcgEventLog,
} from '../../adapters/attestation/eventlog/tcg-log.js';
import { decodeVtpmDocument } from '../../adapters/attestation/shared/vtpm-document.js';
import { createValidator } from '../../adapters/attestation/variants/factory.js';
import {
  createPrivateNetwork,
  type NetworkSlot,
  type PrivateNetwork,
  sweepStaleNetworks,
} from '../../adapters/vm/private-network.js';
import { OVMF_CODE, OVMF_VARS, QemuVm } from '../../adapters/vm/qemu-vm.js';
import { run } from '../../adapters/vm/run.js';
import { MeasurementsPolicy } from '../../domain/measurements.js';
import { bundleEntry } from './bundle.js';
import { GUEST_CONFIG_FW_CFG, type GuestConfig, REPORT_PREFIX } from './guest/protocol.js';
import { buildNodeImage, defaultCacheDir, type NodeImage } from './image.js';
import { COMPUTED_PCRS, computedPcrs, REFERENCE_PCRS, referencePcrs } from './measurements.js';
import { provisionTpm, registeredAkOf } from './provision.js';

/**
 * The kernel command line of a good node. `no_timer_check`: on a loaded host a TCG guest can fail
 * the kernel's IO-APIC timer check and panic.
 */
export const NODE_CMDLINE = 'console=ttyS0 quiet panic=-1 no_timer_check';
/** A tampered node's command line: one extra parameter, so PCR 9 differs. */
export const TAMPERED_CMDLINE = `${NODE_CMDLINE} confboot.debug-shell=1`;
const METADATA_PORT = 8080;

/** Options of {@link miniUp}. */
export interface MiniUpOptions {
  workers: number;
  tampered: number;
  accel: 'auto' | 'kvm' | 'tcg';
  keep?: boolean;
  cacheDir?: string;
  workDir?: string;
  memoryMiB?: number;
  /** Per-VM deadline from start to its attestation, default 900 s under TCG and 120 s under KVM. */
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

/** One VM's outcome. */
export interface MiniNodeResult {
  name: string;
  role: 'control-plane' | 'worker';
  boot: 'good' | 'tampered';
  ip: string;
  /** The last stage reached: booting, measured, attesting, attested or refused (or failed). */
  stage: 'booting' | 'measured' | 'attesting' | 'attested' | 'refused' | 'failed';
  accepted: boolean;
  reason: string;
  /** TCTI the in-VM quote went through. */
  tcti?: string;
  /** The event log in the document replays to the quoted SHA-256 PCRs. */
  eventLogReplays: boolean;
  /** The event log /init sent before node started equals the one in the document. */
  eventLogMatchesBootReport: boolean;
  /** What the metadata server told the VM about itself. */
  metadataSelf?: unknown;
  /** The disk-mapper's result (LUKS2 formatted and mapped with dm-crypt in the VM). */
  disk?: { uuid: string; cipher: string; mapping: string; formatted: boolean };
  mismatches: PcrMismatch[];
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
  nodes: MiniNodeResult[];
  /** The network namespace the run used (removed at the end unless kept). */
  netns: string;
  workDir: string;
  durationMs: number;
  simulated: string[];
  notYet: string[];
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

/** Runs the cluster; always cleans up VMs, swtpms, dnsmasq and the namespace unless `keep`. */
export async function miniUp(options: MiniUpOptions): Promise<MiniResult> {
  const started = Date.now();
  const progress = options.progress ?? (() => {});
  const memoryMiB = options.memoryMiB ?? 1024;
  const cacheDir = options.cacheDir ?? defaultCacheDir();
  if (process.getuid?.() !== 0)
    throw new Error('mini needs root (network namespaces, tap devices, dm-crypt in VMs)');
  const swept = await sweepStaleNetworks();
  if (swept.length > 0)
    progress(`removed ${swept.length} namespace(s) left by an earlier run: ${swept.join(', ')}`);
  const workDir = options.workDir ?? (await mkdtemp(join(tmpdir(), 'confboot-mini-')));
  await mkdir(workDir, { recursive: true });

  const vms: QemuVm[] = [];
  let net: PrivateNetwork | undefined;
  try {
    progress('building the node image (Debian kernel, initramfs with busybox, node, tpm2-tools, cryptsetup)');
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
    const nodeTimeoutMs = options.nodeTimeoutMs ?? (accel === 'kvm' ? 120_000 : 900_000);

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
    const slots = new Map<string, NetworkSlot>();
    if (reference === undefined) slots.set('reference', await net.addSlot('reference'));
    for (const n of names) slots.set(n.name, await net.addSlot(n.name));
    await net.startDhcp();
    const metadataBundle = join(workDir, 'metadata-server.mjs');
    await writeFile(metadataBundle, await bundleEntry('host/metadata-entry'));
    // Each VM's registered AK, published per instance on /self/identity (re-read per request).
    const identitiesFile = join(workDir, 'identities.json');
    await writeFile(identitiesFile, '{}');
    net.spawnInside(
      'node',
      [
        metadataBundle,
        '--leases',
        net.leasesFile,
        '--identities',
        identitiesFile,
        '--listen',
        `${net.hostIp}:${METADATA_PORT}`,
      ],
      join(workDir, 'metadata-server.log'),
    );
    progress(
      `private network ${net.netns}: bridge ${net.hostIp}/24, dnsmasq, metadata server on :${METADATA_PORT}`,
    );

    const registeredAks = new Map<string, Uint8Array>();
    const startVm = async (
      name: string,
      cmdline: string,
      config: GuestConfig | undefined,
    ): Promise<QemuVm> => {
      const dir = join(workDir, name);
      await mkdir(dir, { recursive: true });
      registeredAks.set(name, (await provisionTpm(join(dir, 'tpm'))).akPub);
      await writeFile(
        identitiesFile,
        JSON.stringify(
          Object.fromEntries(
            [...registeredAks].map(([n, ak]) => [
              n,
              { attestationKeyPublic: Buffer.from(ak).toString('base64') },
            ]),
          ),
        ),
      );
      const disk = join(dir, 'state.img');
      await writeFile(disk, new Uint8Array());
      await truncate(disk, 64 * 1024 * 1024);
      const configFile = join(dir, 'config.json');
      await writeFile(configFile, JSON.stringify(config ?? { step: 'probe' }));
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
        fwCfg: { [GUEST_CONFIG_FW_CFG]: configFile },
        disks: [disk],
        nic: { tap: slot.tap, mac: slot.mac },
        netns: net?.netns as string,
      });
      vms.push(vm);
      await vm.start();
      return vm;
    };

    if (reference === undefined) {
      progress('reference boot: booting once to record the firmware event log (PCRs 0–3, 5–7)');
      const vm = await startVm('reference', NODE_CMDLINE, undefined);
      const r = await vm.waitForReport(REPORT_PREFIX, (x) => x.type === 'measured', {
        timeoutMs: nodeTimeoutMs,
        ...(options.signal ? { signal: options.signal } : {}),
      });
      await vm.stop();
      reference = referencePcrs(decodeLog(r.eventLog));
      await mkdir(join(cacheDir, 'reference'), { recursive: true });
      await writeFile(refFile, JSON.stringify({ qemuVersion, eventLog: r.eventLog }));
      referenceSource = `reference boot just now, cached in ${refFile}`;
    }
    const computed = await computedPcrs(image.kernel, image.initrd, NODE_CMDLINE, memoryMiB);
    const expected = new Map<number, Buffer>([...reference, ...computed]);
    const policy = new MeasurementsPolicy(
      new Map([...expected].map(([i, v]) => [i, { expected: new Uint8Array(v), warnOnly: false }])),
    );
    // One validator per VM: the AK-trust option accepts only the AK the host registered for it.
    const validatorFor = (name: string) =>
      createValidator('qemu-vtpm', { policy, qemuAkTrust: registeredAkOf(name, registeredAks.get(name)) });

    const runNode = async (n: (typeof names)[number]): Promise<MiniNodeResult> => {
      const t0 = Date.now();
      const slot = slots.get(n.name) as NetworkSlot;
      const nonce = randomBytes(32);
      const result: MiniNodeResult = {
        name: n.name,
        role: n.role,
        boot: n.boot,
        ip: slot.ip,
        stage: 'booting',
        accepted: false,
        reason: '',
        eventLogReplays: false,
        eventLogMatchesBootReport: false,
        mismatches: [],
        consoleLog: join(workDir, n.name, 'console.log'),
        seconds: 0,
      };
      const say = (stage: MiniNodeResult['stage'], extra = '') => {
        result.stage = stage;
        progress(`${n.name.padEnd(16)} ${stage}${extra ? ` ${extra}` : ''}`);
      };
      try {
        say('booting', `(${n.boot === 'tampered' ? 'tampered: extra kernel parameter' : 'good'}, ${accel})`);
        const vm = await startVm(n.name, n.boot === 'good' ? NODE_CMDLINE : TAMPERED_CMDLINE, {
          step: 'attest',
          nonce: nonce.toString('hex'),
          metadataUrl: `http://${net?.hostIp}:${METADATA_PORT}`,
          stateDisk: '/dev/vda',
        });
        const wait = (type: string) =>
          vm.waitForReport(REPORT_PREFIX, (r) => r.type === type || r.type === 'error', {
            timeoutMs: Math.max(1, nodeTimeoutMs - (Date.now() - t0)),
            ...(options.signal ? { signal: options.signal } : {}),
          });
        const measured = await wait('measured');
        say('measured', `(event log ${decodeLog(measured.eventLog).events.length} events)`);
        const att = await wait('attestation');
        const reports = vm.reports(REPORT_PREFIX);
        const error = reports.find((r) => r.type === 'error');
        if (att.type === 'error' || error) throw new Error(`in the VM: ${String((error ?? att).message)}`);
        const disk = reports.find((r) => r.type === 'disk');
        if (disk)
          result.disk = {
            uuid: String(disk.uuid),
            cipher: String(disk.cipher),
            mapping: String(disk.mapping),
            formatted: disk.formatted === true,
          };
        result.metadataSelf = reports.find((r) => r.type === 'metadata')?.self;
        result.tcti = String(att.tcti);
        say(
          'attesting',
          `(quote through ${result.tcti}${result.disk ? `, ${result.disk.mapping} ${result.disk.cipher}` : ''})`,
        );
        const document = Buffer.from(String(att.document), 'base64');
        const doc = decodeVtpmDocument(document);
        result.eventLogMatchesBootReport = Buffer.from(doc.attestation.eventLog).equals(
          Buffer.from(String(measured.eventLog), 'base64'),
        );
        const quoted = doc.attestation.quotes.find((q) => q.pcrHashAlg === 11)?.pcrs ?? new Map();
        const replayed = replayEventLog(parseEventLog(doc.attestation.eventLog)).get(11) ?? new Map();
        result.eventLogReplays =
          replayed.size > 0 &&
          [...replayed].every(([p, v]) => quoted.has(p) && hex(quoted.get(p)) === hex(v));
        for (const [pcr, want] of expected) {
          const got = quoted.get(pcr) as Uint8Array | undefined;
          if (got === undefined || hex(got) !== hex(want))
            result.mismatches.push({ pcr, expected: hex(want), actual: got ? hex(got) : null });
        }
        try {
          await validatorFor(n.name).validate(document, nonce);
          result.accepted = true;
          result.reason = 'quote, event log and every expected measurement check out';
          say('attested');
        } catch (err) {
          result.reason = (err as Error).message;
          say(
            'refused',
            result.mismatches
              .map(
                (m) =>
                  `PCR ${m.pcr}: expected ${m.expected.slice(0, 16)}…, actual ${m.actual?.slice(0, 16) ?? 'none'}…`,
              )
              .join('; '),
          );
        }
        await vm.waitForExit(accel === 'kvm' ? 10_000 : 60_000);
      } catch (err) {
        result.reason = (err as Error).message;
        say('failed', result.reason);
      }
      result.seconds = Math.round((Date.now() - t0) / 1000);
      return result;
    };

    const nodes = await Promise.all(names.map(runNode));
    const ok = nodes.every(
      (n) =>
        n.accepted === (n.boot === 'good') &&
        n.stage !== 'failed' &&
        n.eventLogReplays &&
        n.eventLogMatchesBootReport &&
        n.tcti === 'device:/dev/tpmrm0' &&
        n.disk !== undefined,
    );
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
      nodes,
      netns: net.netns,
      workDir,
      durationMs: Date.now() - started,
      simulated: [],
      notYet: [
        'bootstrapper, join service and key service inside the VMs',
        'confboot init over the bridge',
        'issued disk key and PCR 15',
      ],
      ok,
    };
  } finally {
    if (!options.keep) {
      await Promise.all(vms.map((v) => v.stop()));
      await net?.destroy();
      await pruneWorkDir(workDir);
    }
  }
}

/** `confboot mini down`: removes every mini namespace (with its VMs and dnsmasq). */
export async function miniDown(): Promise<string[]> {
  const { listMiniNamespaces, removeNamespace } = await import('../../adapters/vm/private-network.js');
  const names = (await listMiniNamespaces()).map((n) => n.name);
  for (const n of names) await removeNamespace(n);
  return names;
}
