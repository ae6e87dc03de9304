/**
 * The command reboot adapter with real processes standing in for the reboot command (this machine
 * is never rebooted): the command runs once per request with its arguments, a refusal rejects
 * naming the command, and the default is systemd's reboot.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CommandPowerControl, SYSTEMCTL_REBOOT } from '../../../src/adapters/system/command-power-control.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'confboot-power-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('CommandPowerControl', () => {
  it('runs the command once per reboot request, with its arguments', async () => {
    const log = join(dir, 'requests');
    const power = new CommandPowerControl(['sh', '-c', `echo "reboot $0" >> ${log}`, '-f']);
    await power.reboot();
    expect(await readFile(log, 'utf8')).toBe('reboot -f\n');
  });

  it('rejects when the reboot is refused, naming the command', async () => {
    const power = new CommandPowerControl(['sh', '-c', 'echo "Access denied" >&2; exit 1']);
    await expect(power.reboot()).rejects.toThrow(
      /^requesting a reboot \(sh -c .*\): exit code 1: Access denied$/,
    );
  });

  it('bounds the command by its timeout', async () => {
    await expect(new CommandPowerControl(['sleep', '60'], 50).reboot()).rejects.toThrow(/killed by SIGKILL/);
  });

  it("defaults to systemd's reboot and refuses an empty command", () => {
    expect(SYSTEMCTL_REBOOT).toEqual(['systemctl', 'reboot']);
    expect(() => new CommandPowerControl([])).toThrow(/reboot command is empty/);
  });
});
