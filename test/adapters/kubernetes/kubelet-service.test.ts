/**
 * The command kubelet service with a real process standing in for `systemctl restart kubelet`:
 * the command runs with its arguments, a failure rejects naming the command, and the default is
 * systemd's restart of the kubelet unit.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CommandKubeletService,
  SYSTEMCTL_RESTART_KUBELET,
} from '../../../src/adapters/kubernetes/kubelet-service.js';

describe('CommandKubeletService', () => {
  it('runs the restart command with its arguments', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'confboot-kubelet-'));
    try {
      const log = join(dir, 'restarts');
      await new CommandKubeletService([
        'sh',
        '-c',
        `echo "restart $0" >> ${log}`,
        'kubelet',
      ]).restartKubelet();
      expect(await readFile(log, 'utf8')).toBe('restart kubelet\n');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('rejects when the restart fails, naming the command', async () => {
    const kubelet = new CommandKubeletService([
      'sh',
      '-c',
      'echo "Unit kubelet.service not found." >&2; exit 5',
    ]);
    await expect(kubelet.restartKubelet()).rejects.toThrow(
      /^restarting the kubelet \(sh -c .*\): exit code 5: Unit kubelet.service not found\.$/,
    );
  });

  it("defaults to systemd's restart of the kubelet unit and refuses an empty command", () => {
    expect(SYSTEMCTL_RESTART_KUBELET).toEqual(['systemctl', 'restart', 'kubelet']);
    expect(() => new CommandKubeletService([])).toThrow(/kubelet restart command is empty/);
  });
});
