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
