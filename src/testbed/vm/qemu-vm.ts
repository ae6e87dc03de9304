/**
 * One QEMU virtual machine with its own swtpm vTPM: OVMF firmware (measured boot into the vTPM),
 * direct kernel boot (`-kernel/-initrd/-append`), console on the first serial port and a report
 * channel on the second (both logged to files in the VM's work directory), optional virtio disks,
 * a tap NIC and fw_cfg files. Optionally started inside a network namespace (`ip netns exec`).
 *
 * Every path is absolute (swtpm fails late on a relative state directory). {@link QemuVm.stop} ends
 * QEMU and swtpm and is safe to call more than once.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, existsSync, openSync, readFileSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';

/**
 * OVMF as Debian's `ovmf` package installs it: the build for a 2 MB flash where it is installed,
 * else the 4 MB one. Both are the same firmware; the 4 MB flash only adds room for Secure Boot
 * variables, and no mini guest boots with Secure Boot. Under TCG the 2 MB build reaches the kernel's
 * EFI stub about 3 s sooner (6.5 s against 9.3–9.7 s with the vTPM, measured alone on 2 cores), on
 * each of the ~35 boots of a test run. The firmware PCRs come from a reference boot with the
 * firmware in use (stages/reference.ts), so either build is measured as it boots.
 */
const OVMF_2M = ['/usr/share/OVMF/OVMF_CODE.fd', '/usr/share/OVMF/OVMF_VARS.fd'] as const;
const OVMF_4M = ['/usr/share/OVMF/OVMF_CODE_4M.fd', '/usr/share/OVMF/OVMF_VARS_4M.fd'] as const;
export const [OVMF_CODE, OVMF_VARS]: readonly [string, string] = OVMF_2M.every((p) => existsSync(p))
  ? OVMF_2M
  : OVMF_4M;

/** What to start. */
export interface VmSpec {
  name: string;
  /** Absolute directory for the VM's logs, firmware variables and swtpm socket. */
  workDir: string;
  /** Absolute swtpm state directory (provisioned by swtpm_setup, or empty for a fresh TPM). */
  tpmStateDir: string;
  kernel: string;
  initrd: string;
  cmdline: string;
  memoryMiB: number;
  accel: 'kvm' | 'tcg';
  /** Virtual CPUs (default 1); under TCG more than one runs with one host thread each (thread=multi). */
  cpus?: number;
  /** fw_cfg files: name (e.g. `opt/confboot/config`) → host file. */
  fwCfg?: Record<string, string>;
  /** Raw disk images attached as virtio disks (vda, vdb, …). */
  disks?: string[];
  /** A NIC on an existing tap device. */
  nic?: { tap: string; mac: string };
  /** Network namespace to run QEMU in. */
  netns?: string;
}

/** Options of {@link QemuVm.waitForReport}. */
export interface WaitOptions {
  timeoutMs: number;
  signal?: AbortSignal;
}

function waitForFile(path: string, timeoutMs: number, child: ChildProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const tick = () => {
      if (existsSync(path)) return resolve();
      if (child.exitCode !== null)
        return reject(new Error(`swtpm exited (${child.exitCode}) before ${path} appeared`));
      if (Date.now() - started > timeoutMs)
        return reject(new Error(`${path} did not appear within ${timeoutMs} ms`));
      setTimeout(tick, 50);
    };
    tick();
  });
}

/** A started VM. */
export class QemuVm {
  readonly consoleLog: string;
  readonly reportLog: string;
  private swtpm: ChildProcess | undefined;
  private qemu: ChildProcess | undefined;
  private exitPromise: Promise<number | null> | undefined;

  constructor(readonly spec: VmSpec) {
    for (const p of [spec.workDir, spec.tpmStateDir, spec.kernel, spec.initrd])
      if (!isAbsolute(p)) throw new Error(`VM ${spec.name}: ${p} is not an absolute path`);
    this.consoleLog = join(spec.workDir, 'console.log');
    this.reportLog = join(spec.workDir, 'report.log');
  }

  /** The QEMU command line (without the netns wrapper). */
  qemuArgs(): string[] {
    const s = this.spec;
    const sock = join(s.workDir, 'swtpm.sock');
    const args = [
      '-machine',
      'pc',
      '-accel',
      s.accel === 'tcg' && (s.cpus ?? 1) > 1 ? 'tcg,thread=multi' : s.accel,
      '-m',
      String(s.memoryMiB),
      '-smp',
      String(s.cpus ?? 1),
      '-nodefaults',
      '-no-user-config',
      '-display',
      'none',
      '-no-reboot',
      '-drive',
      `if=pflash,format=raw,unit=0,file=${OVMF_CODE},readonly=on`,
      '-drive',
      `if=pflash,format=raw,unit=1,file=${join(s.workDir, 'OVMF_VARS.fd')}`,
      '-kernel',
      s.kernel,
      '-initrd',
      s.initrd,
      '-append',
      s.cmdline,
      '-chardev',
      `socket,id=chrtpm,path=${sock}`,
      '-tpmdev',
      'emulator,id=tpm0,chardev=chrtpm',
      '-device',
      'tpm-tis,tpmdev=tpm0',
      '-serial',
      `file:${this.consoleLog}`,
      '-serial',
      `file:${this.reportLog}`,
    ];
    for (const [name, file] of Object.entries(s.fwCfg ?? {}))
      args.push('-fw_cfg', `name=${name},file=${file}`);
    for (const d of s.disks ?? []) args.push('-drive', `file=${d},format=raw,if=virtio,cache=unsafe`);
    if (s.nic) {
      args.push('-netdev', `tap,id=n0,ifname=${s.nic.tap},script=no,downscript=no`);
      args.push('-device', `virtio-net-pci,netdev=n0,mac=${s.nic.mac},romfile=`);
    }
    return args;
  }

  /** Starts swtpm, then QEMU; resolves once QEMU is spawned. */
  async start(): Promise<void> {
    const s = this.spec;
    copyFileSync(OVMF_VARS, join(s.workDir, 'OVMF_VARS.fd'));
    const sock = join(s.workDir, 'swtpm.sock');
    const swtpmLog = openSync(join(s.workDir, 'swtpm.log'), 'a');
    this.swtpm = spawn(
      'swtpm',
      [
        'socket',
        '--tpm2',
        '--tpmstate',
        `dir=${s.tpmStateDir}`,
        '--ctrl',
        `type=unixio,path=${sock}`,
        '--terminate',
      ],
      { stdio: ['ignore', swtpmLog, swtpmLog] },
    );
    this.swtpm.on('error', () => {});
    await waitForFile(sock, 10_000, this.swtpm);
    const qemuLog = openSync(join(s.workDir, 'qemu.log'), 'a');
    const [cmd, args] = s.netns
      ? ['ip', ['netns', 'exec', s.netns, 'qemu-system-x86_64', ...this.qemuArgs()]]
      : ['qemu-system-x86_64', this.qemuArgs()];
    const qemu = spawn(cmd as string, args as string[], { stdio: ['ignore', qemuLog, qemuLog] });
    this.qemu = qemu;
    this.exitPromise = new Promise((resolve) => {
      qemu.on('error', () => resolve(null));
      qemu.on('exit', (code) => resolve(code));
    });
  }

  /** Process ids (for cleanup bookkeeping). */
  pids(): { qemu?: number; swtpm?: number } {
    return {
      ...(this.qemu?.pid === undefined ? {} : { qemu: this.qemu.pid }),
      ...(this.swtpm?.pid === undefined ? {} : { swtpm: this.swtpm.pid }),
    };
  }

  /** The end of QEMU's own output and of the serial console, for error messages. */
  lastWords(): string {
    const tail = (p: string) => {
      try {
        return (
          readFileSync(p, 'utf8')
            // biome-ignore lint/suspicious/noControlCharactersInRegex: strips OVMF's ANSI escape sequences
            .replace(/\x1b\[[0-9;=]*[A-Za-z]/g, '')
            .trim()
            .slice(-400)
        );
      } catch {
        return '';
      }
    };
    const qemu = tail(join(this.spec.workDir, 'qemu.log'));
    return `${qemu ? `qemu: ${qemu}; ` : ''}console: ${tail(this.consoleLog) || '(empty)'}`;
  }

  /** Every report line's JSON so far. */
  reports(prefix: string): Record<string, unknown>[] {
    if (!existsSync(this.reportLog)) return [];
    const out: Record<string, unknown>[] = [];
    for (const raw of readFileSync(this.reportLog, 'utf8').split('\n')) {
      const line = raw.replace(/\r$/, '');
      const i = line.indexOf(prefix);
      if (i < 0) continue;
      try {
        out.push(JSON.parse(line.slice(i + prefix.length)) as Record<string, unknown>);
      } catch {
        // a line still being written
      }
    }
    return out;
  }

  /**
   * Resolves with the first report for which `pick` returns true; rejects when the VM exits first,
   * on timeout (naming the console log) or on abort.
   */
  waitForReport(
    prefix: string,
    pick: (r: Record<string, unknown>) => boolean,
    options: WaitOptions,
  ): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      const started = Date.now();
      let exited = false;
      void this.exitPromise?.then(() => {
        exited = true;
      });
      const tick = () => {
        const hit = this.reports(prefix).find(pick);
        if (hit) return resolve(hit);
        if (options.signal?.aborted) return reject(new Error(`VM ${this.spec.name}: stopped`));
        if (exited)
          return reject(new Error(`VM ${this.spec.name} powered off first (console: ${this.consoleLog})`));
        if (Date.now() - started > options.timeoutMs)
          return reject(
            new Error(
              `VM ${this.spec.name}: no report within ${options.timeoutMs} ms (console: ${this.consoleLog})`,
            ),
          );
        setTimeout(tick, 250);
      };
      tick();
    });
  }

  /** Resolves with QEMU's exit code once it exits (bounded by `timeoutMs`: undefined then). */
  async waitForExit(timeoutMs: number): Promise<number | null | undefined> {
    if (this.exitPromise === undefined) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((r) => {
      timer = setTimeout(() => r(undefined), timeoutMs);
    });
    try {
      return await Promise.race([this.exitPromise, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Leaves QEMU and swtpm running without this process waiting for them (it may exit); they are
   * ended later by removing the VM's network namespace (swtpm ends with QEMU's connection).
   */
  release(): void {
    this.qemu?.unref();
    this.swtpm?.unref();
  }

  /** Whether QEMU is still running. */
  get running(): boolean {
    return this.qemu !== undefined && this.qemu.exitCode === null && this.qemu.signalCode === null;
  }

  /** Stops QEMU (SIGTERM, then SIGKILL after 3 s) and swtpm. */
  async stop(): Promise<void> {
    const kill = async (child: ChildProcess | undefined) => {
      if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
      const done = new Promise<void>((r) => child.once('exit', () => r()));
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 3000);
      await done;
      clearTimeout(t);
    };
    await kill(this.qemu);
    await kill(this.swtpm);
  }
}
