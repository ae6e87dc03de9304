/**
 * The mini node's kubelet-restart and reboot scripts, run for real with this machine's sh against
 * stand-ins for the VM's paths: a file for the report port, /proc (a mount point) or a plain
 * directory for the state disk's mount, and `echo` into a file for busybox's `reboot -f`.
 */
import { spawnSync } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeBootCommands } from '../../../../src/testbed/mini/guest/boot-commands.js';
import { REPORT_PREFIX } from '../../../../src/testbed/mini/guest/protocol.js';
import { useTmpDirs } from '../../../support/tmp.js';

const tmp = useTmpDirs('confboot-boot-commands-');

async function reports(port: string): Promise<Record<string, unknown>[]> {
  return (await readFile(port, 'utf8'))
    .split('\n')
    .filter((l) => l.startsWith(REPORT_PREFIX))
    .map((l) => JSON.parse(l.slice(REPORT_PREFIX.length)) as Record<string, unknown>);
}

async function setUp(stateMount: string, credentials: boolean) {
  const dir = tmp();
  const port = join(dir, 'ttyS1');
  const cert = join(dir, 'pki/kubelet-client-crt.pem');
  const key = join(dir, 'pki/kubelet-client-key.pem');
  if (credentials) {
    await mkdir(join(dir, 'pki'));
    await writeFile(cert, 'CERT');
    await writeFile(key, 'KEY');
  }
  const rebooted = join(dir, 'rebooted');
  const commands = await writeBootCommands(join(dir, 'run'), {
    reportPort: port,
    stateMount,
    kubeletCertPath: cert,
    kubeletKeyPath: key,
    reboot: `sh -c 'echo "$0" > ${rebooted}' -f`,
  });
  return { commands, port, rebooted };
}

describe('mini boot commands', () => {
  it('kubelet restart on a mounted state disk with the credentials: reports both and exits 0', async () => {
    const s = await setUp('/proc', true);
    expect(spawnSync(s.commands.kubeletRestart).status).toBe(0);
    expect(await reports(s.port)).toEqual([
      { type: 'kubelet-restarted', simulated: true, stateMounted: true, kubeletCredentials: true },
    ]);
  });

  it('kubelet restart without the state disk mounted: reports it and exits non-zero', async () => {
    const s = await setUp(tmp(), false);
    expect(spawnSync(s.commands.kubeletRestart).status).not.toBe(0);
    expect(await reports(s.port)).toEqual([
      { type: 'kubelet-restarted', simulated: true, stateMounted: false, kubeletCredentials: false },
    ]);
  });

  it('reboot: reports the request, then runs the reboot', async () => {
    const s = await setUp('/proc', true);
    expect(spawnSync(s.commands.reboot).status).toBe(0);
    expect(await reports(s.port)).toEqual([{ type: 'reboot-requested' }]);
    expect(await readFile(s.rebooted, 'utf8')).toBe('-f\n');
  });
});
