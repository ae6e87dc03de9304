/**
 * A private L2 network for VMs, inside a network namespace this process creates: a bridge with the
 * host-side address, one tap device per VM, and real dnsmasq handing out addresses on the bridge
 * (fixed MAC → hostname/IP reservations, no DNS, no router option). The namespace has no link to
 * any other namespace, so nothing routes off the machine. Every resource is named with a prefix
 * and the owner's process id; {@link sweepStaleNetworks} removes those whose owner is gone (a
 * crashed run), {@link PrivateNetwork.destroy} removes this one.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { processRuns, run } from './run.js';

/** Prefix of every namespace mini creates. */
export const NETNS_PREFIX = 'cbmini-';
const BRIDGE = 'br0';

/** Options of {@link createPrivateNetwork}. */
export interface PrivateNetworkOptions {
  /** Absolute directory for the leases file and dnsmasq's log. */
  workDir: string;
  /** /24 prefix, default 10.42.0 (the bridge is .1, VMs get .10 and up). */
  subnet?: string;
  /** Owner pid in the namespace name, default this process. */
  ownerPid?: number;
}

/** One VM's place on the network. */
export interface NetworkSlot {
  name: string;
  tap: string;
  mac: string;
  ip: string;
}

/** Names of the namespaces mini created, with their owner pids. */
export async function listMiniNamespaces(): Promise<{ name: string; owner: number }[]> {
  const { stdout } = await run('ip', ['netns', 'list']);
  return stdout
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0] ?? '')
    .filter((n) => n.startsWith(NETNS_PREFIX))
    .map((name) => ({ name, owner: Number(name.slice(NETNS_PREFIX.length).split('-')[0]) }));
}

/** Kills every process in namespace `name`, then deletes it. */
export async function removeNamespace(name: string): Promise<void> {
  const { stdout } = await run('ip', ['netns', 'pids', name], { allowFailure: true });
  const pids = stdout
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((p) => Number.isInteger(p) && p > 1 && p !== process.pid);
  for (const p of pids) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {}
  }
  const deadline = Date.now() + 5000;
  while (pids.some(processRuns) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await run('ip', ['netns', 'del', name], { allowFailure: true });
}

/** Removes mini namespaces whose owner process is gone; returns their names. */
export async function sweepStaleNetworks(): Promise<string[]> {
  const removed: string[] = [];
  for (const ns of await listMiniNamespaces()) {
    if (Number.isInteger(ns.owner) && ns.owner > 0 && processRuns(ns.owner)) continue;
    await removeNamespace(ns.name);
    removed.push(ns.name);
  }
  return removed;
}

/** A created network. */
export class PrivateNetwork {
  private dnsmasq: ChildProcess | undefined;
  private readonly inside: ChildProcess[] = [];
  private readonly slots: NetworkSlot[] = [];

  constructor(
    /** The namespace name. */
    readonly netns: string,
    /** The bridge's address (the host side, where the metadata server listens). */
    readonly hostIp: string,
    readonly subnet: string,
    readonly leasesFile: string,
    private readonly workDir: string,
  ) {}

  /** Adds a tap device for VM `name` with a fixed MAC and IP reservation; call before startDhcp. */
  async addSlot(name: string): Promise<NetworkSlot> {
    if (!/^[a-z][a-z0-9-]{0,30}$/.test(name)) throw new Error(`network: bad VM name ${JSON.stringify(name)}`);
    if (this.dnsmasq) throw new Error('network: add every VM before dnsmasq starts');
    const i = this.slots.length;
    if (i >= 80) throw new Error('network: at most 80 VMs');
    const slot: NetworkSlot = {
      name,
      tap: `tap${i}`,
      mac: `52:54:00:c0:00:${(0x10 + i).toString(16).padStart(2, '0')}`,
      ip: `${this.subnet}.${10 + i}`,
    };
    await run('ip', ['-n', this.netns, 'tuntap', 'add', 'dev', slot.tap, 'mode', 'tap']);
    await run('ip', ['-n', this.netns, 'link', 'set', slot.tap, 'master', BRIDGE, 'up']);
    this.slots.push(slot);
    return slot;
  }

  /** Starts dnsmasq in the namespace (DHCP only) and waits until it runs. */
  async startDhcp(): Promise<void> {
    const log = openSync(join(this.workDir, 'dnsmasq.log'), 'a');
    const args = [
      'netns',
      'exec',
      this.netns,
      'dnsmasq',
      '--no-daemon',
      '--conf-file=/dev/null',
      `--interface=${BRIDGE}`,
      '--bind-interfaces',
      '--port=0',
      '--no-resolv',
      '--no-hosts',
      '--log-dhcp',
      '--log-facility=-',
      `--dhcp-range=${this.subnet}.10,${this.subnet}.99,255.255.255.0,1h`,
      `--dhcp-leasefile=${this.leasesFile}`,
      '--dhcp-option=option:router',
      '--dhcp-option=option:dns-server',
      ...this.slots.map((s) => `--dhcp-host=${s.mac},${s.ip},${s.name}`),
    ];
    const child = spawn('ip', args, { stdio: ['ignore', log, log] });
    child.on('error', () => {});
    this.dnsmasq = child;
    const deadline = Date.now() + 10_000;
    const logPath = join(this.workDir, 'dnsmasq.log');
    // With --no-daemon dnsmasq writes no pid file; it is ready once it logs its DHCP range.
    while (!(existsSync(logPath) && readFileSync(logPath, 'utf8').includes('DHCP, IP range'))) {
      if (child.exitCode !== null)
        throw new Error(`dnsmasq exited (${child.exitCode}): ${readFileSync(logPath, 'utf8').slice(-500)}`);
      if (Date.now() > deadline) throw new Error('dnsmasq did not start within 10 s');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Runs `cmd args…` as a child process inside the namespace (stdio to `logFile`). */
  spawnInside(cmd: string, args: readonly string[], logFile: string, env?: NodeJS.ProcessEnv): ChildProcess {
    const log = openSync(logFile, 'a');
    const child = spawn('ip', ['netns', 'exec', this.netns, cmd, ...args], {
      stdio: ['ignore', log, log],
      env: env ?? process.env,
    });
    child.on('error', () => {});
    this.inside.push(child);
    return child;
  }

  /**
   * Leaves the namespace, dnsmasq and every process spawned inside running without this process
   * waiting for them (it may exit); `confboot mini down` or the next run's sweep removes them.
   */
  release(): void {
    this.dnsmasq?.unref();
    for (const c of this.inside) c.unref();
  }

  /** Stops dnsmasq and everything else in the namespace, then deletes it. */
  async destroy(): Promise<void> {
    this.dnsmasq?.kill('SIGTERM');
    await removeNamespace(this.netns);
  }
}

/** Creates the namespace, its loopback and the bridge with the host address. */
export async function createPrivateNetwork(options: PrivateNetworkOptions): Promise<PrivateNetwork> {
  const owner = options.ownerPid ?? process.pid;
  const netns = `${NETNS_PREFIX}${owner}-${Date.now().toString(36)}`;
  const subnet = options.subnet ?? '10.42.0';
  if (!/^\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(subnet)) throw new Error(`network: bad subnet ${subnet}`);
  await run('ip', ['netns', 'add', netns]);
  try {
    await run('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
    await run('ip', ['-n', netns, 'link', 'add', BRIDGE, 'type', 'bridge']);
    await run('ip', ['-n', netns, 'addr', 'add', `${subnet}.1/24`, 'dev', BRIDGE]);
    await run('ip', ['-n', netns, 'link', 'set', BRIDGE, 'up']);
  } catch (err) {
    await removeNamespace(netns);
    throw err;
  }
  return new PrivateNetwork(
    netns,
    `${subnet}.1`,
    subnet,
    join(options.workDir, 'dnsmasq.leases'),
    options.workDir,
  );
}
