/**
 * The two commands the production bootstrapper runs on a mini node, where no systemd exists: the
 * agent writes them as busybox shell scripts into /run (a tmpfs) before it starts the bootstrapper
 * and passes them as `--kubelet-restart-command` and `--reboot-command`.
 * - kubelet restart (SIMULATED: no kubelet exists in the node image): checks what a kubelet restarted
 *   from the existing state needs (the state disk mounted at /run/state with the kubelet credentials
 *   of the node's first join on it), reports that on the report port, and fails when the state disk
 *   is not mounted;
 * - reboot: reports `reboot-requested`, then `reboot -f` (busybox: sync, then the reboot system call,
 *   no init involved). QEMU runs with -no-reboot, so the VM ends and the host boots it again.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DEFAULT_JOIN_PATHS } from '../../../domain/join-ticket-apply.js';
import { REPORT_PORT, REPORT_PREFIX } from './protocol.js';
import { STATE_MOUNT } from './state.js';

/** Where the scripts look and what the reboot runs; the defaults are the VM's (tests give their own). */
export interface BootCommandOptions {
  reportPort?: string;
  stateMount?: string;
  kubeletCertPath?: string;
  kubeletKeyPath?: string;
  /** The reboot itself (default busybox `reboot -f`). */
  reboot?: string;
}

/** Paths of the written commands. */
export interface BootCommands {
  kubeletRestart: string;
  reboot: string;
}

/** A report line written by `sh`: `fields` is JSON text in which `$m`-style shell variables expand. */
function reportLine(fields: string, port: string): string {
  const json = fields.replaceAll('"', '\\"');
  return `echo "${REPORT_PREFIX}${json}" > '${port}'`;
}

/** The kubelet restart script (SIMULATED; see the module comment). */
export function kubeletRestartScript(o: Required<BootCommandOptions>): string {
  return [
    '#!/bin/sh',
    '# SIMULATED kubelet restart (confboot mini): no kubelet exists in the node image.',
    `if grep -q ' ${o.stateMount} ' /proc/mounts; then m=true; else m=false; fi`,
    `if [ -s '${o.kubeletCertPath}' ] && [ -s '${o.kubeletKeyPath}' ]; then c=true; else c=false; fi`,
    reportLine(
      '{"type":"kubelet-restarted","simulated":true,"stateMounted":$m,"kubeletCredentials":$c}',
      o.reportPort,
    ),
    '[ "$m" = true ]',
    '',
  ].join('\n');
}

/** The reboot script (see the module comment). */
export function rebootScript(o: Required<BootCommandOptions>): string {
  return ['#!/bin/sh', reportLine('{"type":"reboot-requested"}', o.reportPort), `exec ${o.reboot}`, ''].join(
    '\n',
  );
}

/** Writes both scripts into `dir` (mode 0700) and returns their paths. */
export async function writeBootCommands(
  dir: string,
  options: BootCommandOptions = {},
): Promise<BootCommands> {
  const o: Required<BootCommandOptions> = {
    reportPort: options.reportPort ?? REPORT_PORT,
    stateMount: options.stateMount ?? STATE_MOUNT,
    kubeletCertPath: options.kubeletCertPath ?? DEFAULT_JOIN_PATHS.kubeletCertPath,
    kubeletKeyPath: options.kubeletKeyPath ?? DEFAULT_JOIN_PATHS.kubeletKeyPath,
    reboot: options.reboot ?? 'reboot -f',
  };
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const commands = { kubeletRestart: join(dir, 'kubelet-restart'), reboot: join(dir, 'reboot') };
  await writeFile(commands.kubeletRestart, kubeletRestartScript(o), { mode: 0o700 });
  await writeFile(commands.reboot, rebootScript(o), { mode: 0o700 });
  return commands;
}
