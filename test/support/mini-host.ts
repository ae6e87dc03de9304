/**
 * What a test that boots mini's QEMU VMs needs on this machine: the tools, OVMF and root. Returns
 * what is missing (empty when the VM tests can run).
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { OVMF_CODE } from '../../src/testbed/vm/qemu-vm.js';

const TOOLS = [
  'qemu-system-x86_64',
  'swtpm',
  'swtpm_setup',
  'dpkg-deb',
  'depmod',
  'dnsmasq',
  'ip',
  'cryptsetup',
];

/** The tools, firmware and privileges a mini VM test lacks here. */
export function missingForMiniVms(): string[] {
  const missing = TOOLS.filter((c) => spawnSync('sh', ['-c', `command -v ${c}`]).status !== 0);
  if (!existsSync(OVMF_CODE)) missing.push(OVMF_CODE);
  if (process.getuid?.() !== 0) missing.push('root');
  return missing;
}

/**
 * A progress sink for a VM scenario test: each line goes to `lines` as mini printed it, and at once
 * to stderr with the seconds since the scenario started and the test's name, so a CI log shows where
 * a scenario's time goes (vitest prints a test's stderr as it comes).
 */
export function timedProgress(name: string, lines: string[] = []): (line: string) => void {
  const started = performance.now();
  return (line) => {
    lines.push(line);
    const seconds = ((performance.now() - started) / 1000).toFixed(1).padStart(6);
    process.stderr.write(`[${name} +${seconds}s] ${line}\n`);
  };
}
