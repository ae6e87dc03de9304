/**
 * What a mini node keeps on its encrypted state disk, mounted at /run/state (upstream's mount
 * point), so that it survives a reboot the way a real node's does:
 * - the filesystem itself: made (busybox mke2fs, ext2) when the agent formatted a blank disk;
 * - /etc/kubernetes, bind-mounted from the disk (the simulated kubeadm's CA, admin.conf, the API
 *   server's serving certificate: upstream keeps them on the state disk too);
 * - the SIMULATED API server's objects (Secrets, DiskBindings, JoiningNodes, Nodes, CSRs,
 *   EvidenceRecords, …), snapshotted to the disk on every change: they stand for etcd, which lives on
 *   the control plane's state disk;
 * - the lifecycle scenario's marker file, written once and read back after every boot.
 * A disk set up before is mounted by the production disk mapper (`--state-mount`) once it opened it.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, open, readFile, rename, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { syncDir } from '../../../adapters/state/exclusive-file-writer.js';
import type { FakeKubeApi } from '../../simulated/simulated-kube-api.js';

/** Where the state disk's mapping is mounted. */
export const STATE_MOUNT = '/run/state';
const KUBERNETES_DIR = '/etc/kubernetes';
const KUBERNETES_ON_DISK = `${STATE_MOUNT}/kubernetes`;
const API_SNAPSHOT = `${STATE_MOUNT}/confboot-mini/api-server.json`;
const MARKER = `${STATE_MOUNT}/confboot-mini/marker`;

function exec(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { timeout: 300_000 }, (err, _out, stderr) => {
      if (err) reject(new Error(`${cmd} ${args.join(' ')}: ${String(stderr).trim() || err.message}`));
      else resolve();
    });
  });
}

/** Whether something is mounted at `dir`. */
export function mounted(dir: string): boolean {
  try {
    return readFileSync('/proc/mounts', 'utf8')
      .split('\n')
      .some((l) => l.split(' ')[1] === dir);
  } catch {
    return false;
  }
}

/** Makes an ext2 filesystem on the fresh mapping and mounts it at /run/state. */
export async function makeStateFilesystem(mapping: string): Promise<void> {
  await exec('mke2fs', ['-q', mapping]);
  await mkdir(STATE_MOUNT, { recursive: true, mode: 0o700 });
  await exec('mount', [mapping, STATE_MOUNT]);
}

/** Bind-mounts /etc/kubernetes from the state disk (once it is mounted); false when it is not. */
export async function bindKubernetes(): Promise<boolean> {
  if (!mounted(STATE_MOUNT)) return false;
  if (mounted(KUBERNETES_DIR)) return true;
  await mkdir(KUBERNETES_ON_DISK, { recursive: true, mode: 0o700 });
  await mkdir(KUBERNETES_DIR, { recursive: true });
  await exec('mount', ['-o', 'bind', KUBERNETES_ON_DISK, KUBERNETES_DIR]);
  return true;
}

/** Writes the marker on the state disk (synced); throws when the disk is not mounted. */
export async function writeMarker(value: string): Promise<void> {
  if (!mounted(STATE_MOUNT)) throw new Error('the state disk is not mounted: no marker written');
  await mkdir(`${STATE_MOUNT}/confboot-mini`, { recursive: true });
  await writeFile(MARKER, value, { flag: 'wx' });
  await exec('sync', []);
}

/** The marker on the state disk, if it is mounted and holds one. */
export function readMarker(): { mounted: boolean; marker: string | null } {
  const isMounted = mounted(STATE_MOUNT);
  return {
    mounted: isMounted,
    marker: isMounted && existsSync(MARKER) ? readFileSync(MARKER, 'utf8') : null,
  };
}

/**
 * The API server's stores kept in the snapshot: every object etcd would keep across a control-plane
 * restart. Nodes too: a real API server still lists a node that was powered off, so the node
 * operator does not take its DiskBinding for one of a node that is gone.
 */
function stores(api: FakeKubeApi): Record<string, Map<string, Record<string, unknown>>> {
  return {
    secrets: api.secrets,
    configMaps: api.configMaps,
    nodeVersions: api.nodeVersions,
    joiningNodes: api.joiningNodes,
    diskBindings: api.diskBindings,
    nodes: api.nodeRecords.nodes,
    csrs: api.nodeRecords.csrs,
    evidenceRecords: api.evidenceRecords,
  };
}

/** Loads the API server's objects from the state disk into `api`; false when there is no snapshot. */
export async function restoreApiServer(api: FakeKubeApi): Promise<boolean> {
  if (!existsSync(API_SNAPSHOT)) return false;
  const saved = JSON.parse(await readFile(API_SNAPSHOT, 'utf8')) as Record<string, [string, unknown][]>;
  for (const [name, store] of Object.entries(stores(api)))
    for (const [k, v] of saved[name] ?? []) store.set(k, v as Record<string, unknown>);
  api.nodeRecords.resumeNumbering();
  // No kubelet posted status while the control plane was down: as the node lifecycle controller
  // does, every restored Node is Ready=Unknown until its kubelet reports again. A Node kept Ready
  // made the node operator delete the JoiningNode of a node that was joining again under the same
  // name, and its kubelet's CSR was then denied (no pending join ticket).
  const now = new Date().toISOString();
  for (const node of api.nodeRecords.nodes.values()) {
    const status = (node.status ?? {}) as { conditions?: Array<Record<string, unknown>> };
    const others = (status.conditions ?? []).filter((c) => c.type !== 'Ready');
    node.status = {
      ...status,
      conditions: [
        ...others,
        {
          type: 'Ready',
          status: 'Unknown',
          reason: 'NodeStatusUnknown',
          message: 'Kubelet stopped posting node status.',
          lastTransitionTime: now,
        },
      ],
    };
  }
  return true;
}

/**
 * Writes `text` to `file` so that a power-off at any moment leaves the old or the new content, as
 * etcd syncs its log: the data reaches the disk before the rename, the rename before this returns.
 */
async function writeDurably(file: string, text: string): Promise<void> {
  const next = `${file}.next`;
  const fh = await open(next, 'w', 0o600);
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(next, file);
  await syncDir(dirname(file));
}

/** Snapshots the API server's objects to the state disk (durably); returns the snapshot text. */
export async function saveApiServer(api: FakeKubeApi, last: string): Promise<string> {
  const now = JSON.stringify(Object.fromEntries(Object.entries(stores(api)).map(([s, m]) => [s, [...m]])));
  if (now === last || !mounted(STATE_MOUNT)) return last;
  await mkdir(`${STATE_MOUNT}/confboot-mini`, { recursive: true });
  await writeDurably(API_SNAPSHOT, now);
  return now;
}
