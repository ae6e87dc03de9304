/**
 * The node's systemd units (deploy/node/*.service), checked by systemd itself: `systemd-analyze
 * verify` in a throwaway root that holds this machine's system units (so network-online.target and
 * the other targets resolve) and the documented install path of the CLI, /usr/bin/confboot (a
 * wrapper that runs this clone's built CLI: verify only checks that ExecStart is executable). Its
 * warnings count as failures (an unknown directive is only a warning), and planted mistakes show
 * that it catches them. Then what the units promise: the ordering, the restart policy, no mount
 * namespace for the disk mapper (its mount must reach the host), and flags the CLI really has.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { run as bootstrapper } from '../../src/app/cli/bootstrapper.js';
import { useTmpDirs } from '../support/tmp.js';

const repo = resolve(import.meta.dirname, '../..');
const unitsDir = join(repo, 'deploy/node');
const UNITS = readdirSync(unitsDir)
  .filter((f) => f.endsWith('.service'))
  .sort();
const tmp = useTmpDirs('confboot-node-units-');

/** A throwaway root with the system units, /usr/bin/confboot and `units` (name → text) installed. */
function installRoot(units: Record<string, string>): string {
  const root = tmp();
  cpSync('/usr/lib/systemd/system', join(root, 'usr/lib/systemd/system'), { recursive: true });
  mkdirSync(join(root, 'usr/bin'), { recursive: true });
  writeFileSync(
    join(root, 'usr/bin/confboot'),
    `#!/bin/sh\nexec '${repo}/node_modules/.bin/node' '${repo}/dist/src/app/cli/main.js' "$@"\n`,
    { mode: 0o755 },
  );
  mkdirSync(join(root, 'etc/systemd/system'), { recursive: true });
  for (const [name, text] of Object.entries(units))
    writeFileSync(join(root, 'etc/systemd/system', name), text);
  return root;
}

/** `systemd-analyze verify` of `units` in a fresh root: exit status and stderr. */
function verify(units: Record<string, string>): { status: number | null; stderr: string } {
  const root = installRoot(units);
  const r = spawnSync(
    'systemd-analyze',
    ['verify', `--root=${root}`, '--man=no', ...Object.keys(units).map((u) => `/etc/systemd/system/${u}`)],
    { encoding: 'utf8', timeout: 60_000 },
  );
  if (r.error) throw r.error;
  return { status: r.status, stderr: r.stderr.trim() };
}

const shipped = Object.fromEntries(UNITS.map((u) => [u, readFileSync(join(unitsDir, u), 'utf8')]));
const diskMapper = shipped['confboot-disk-mapper.service'] ?? '';
const boot = shipped['confboot-bootstrapper.service'] ?? '';

/** The values of `key` in `unit` (every line `key=value`, comments left out). */
function values(unit: string, key: string): string[] {
  return unit
    .split('\n')
    .filter((l) => l.startsWith(`${key}=`))
    .map((l) => l.slice(key.length + 1).trim());
}

describe('deploy/node: the systemd units', () => {
  it('ships the disk mapper and the bootstrapper', () => {
    expect(UNITS).toEqual(['confboot-bootstrapper.service', 'confboot-disk-mapper.service']);
  });

  it('systemd-analyze verify passes without a warning', () => {
    expect(verify(shipped)).toEqual({ status: 0, stderr: '' });
  });

  it.each([
    [
      'a misspelt directive',
      (u: string) => u.replace('TimeoutStartSec=', 'TimeoutStartSecs='),
      /Unknown key 'TimeoutStartSecs'/,
    ],
    [
      'an ExecStart that is not installed',
      (u: string) => u.replace('/usr/bin/confboot', '/usr/sbin/confboot'),
      /Command \/usr\/sbin\/confboot is not executable/,
    ],
  ])('verify catches %s', (_name, plant, message) => {
    const broken = verify({ ...shipped, 'confboot-disk-mapper.service': plant(diskMapper) });
    expect(broken.stderr).toMatch(message);
  });

  it('verify catches a required unit that does not exist', () => {
    const broken = verify({
      ...shipped,
      'confboot-bootstrapper.service': boot.replace('[Unit]', '[Unit]\nRequires=confboot-diskmapper.service'),
    });
    expect(broken.status).not.toBe(0);
    expect(broken.stderr).toMatch(/confboot-diskmapper\.service/);
  });

  it('the disk mapper runs before the bootstrapper, both after the network is online', () => {
    expect(values(diskMapper, 'Before')).toEqual(['confboot-bootstrapper.service kubelet.service']);
    // Wanted, not required: a failed disk-mapper start must not fail the bootstrapper for good.
    expect(values(boot, 'Requires')).toEqual([]);
    expect(values(boot, 'Wants')).toEqual(['network-online.target confboot-disk-mapper.service']);
    expect(values(boot, 'After')).toEqual(['network-online.target confboot-disk-mapper.service']);
    expect(values(diskMapper, 'Wants')).toEqual(['network-online.target']);
    expect(values(diskMapper, 'After')).toEqual(['network-online.target']);
  });

  it('the disk mapper is a oneshot without a start timeout or restarts; the bootstrapper restarts on failure without a start limit', () => {
    expect(values(diskMapper, 'Type')).toEqual(['oneshot']);
    expect(values(diskMapper, 'TimeoutStartSec')).toEqual(['infinity']);
    // Only the bootstrapper retries (running the disk mapper again first): never two on one disk.
    expect(values(diskMapper, 'Restart')).toEqual([]);
    expect(values(boot, 'Restart')).toEqual(['on-failure']);
    expect(values(boot, 'StartLimitIntervalSec')).toEqual(['0']);
    for (const u of [diskMapper, boot]) expect(values(u, 'RemainAfterExit')).toEqual(['yes']);
  });

  it("the disk mapper has no mount namespace (its /run/state mount must reach the host), and Node's JIT may run", () => {
    const namespaced =
      /^(ProtectSystem|ProtectHome|PrivateTmp|PrivateDevices|PrivateMounts|ProtectKernel\w+|ProtectControlGroups|ProtectClock|ReadOnlyPaths|ReadWritePaths|InaccessiblePaths|TemporaryFileSystem|BindPaths|BindReadOnlyPaths|RootDirectory|RootImage)=/m;
    expect(diskMapper).not.toMatch(namespaced);
    for (const u of [diskMapper, boot]) {
      expect(u).not.toMatch(/^MemoryDenyWriteExecute=yes/m);
      expect(values(u, 'NoNewPrivileges')).toEqual(['yes']);
    }
  });

  it('runs flags and reads variables that confboot bootstrapper has; the reboot and kubelet restart are its defaults', async () => {
    const chunks: Buffer[] = [];
    const out = new Writable({
      write(chunk, _enc, cb) {
        chunks.push(Buffer.from(chunk));
        cb();
      },
    });
    expect(await bootstrapper(['--help'], { out })).toBe(0);
    const help = Buffer.concat(chunks).toString('utf8');
    const [mapperStart] = values(diskMapper, 'ExecStart');
    const [bootStart] = values(boot, 'ExecStart');
    expect(mapperStart).toBe('/usr/bin/confboot bootstrapper --disk-mapper-only');
    expect(bootStart).toBe('/usr/bin/confboot bootstrapper');
    for (const flag of `${mapperStart} ${bootStart}`.match(/--[a-z-]+/g) ?? []) expect(help).toContain(flag);
    expect(help).toMatch(/--reboot-command CMD[^\n]*\bsystemctl reboot\b/);
    expect(help).toMatch(/--kubelet-restart-command CMD[^\n]*\bsystemctl restart kubelet\b/);
    // The variables deploy/node/README.md puts in /etc/confboot/node.env.
    for (const v of ['CONFBOOT_CLOUD', 'CONFBOOT_VARIANT', 'CONFBOOT_DISK', 'CONFBOOT_STATE_MOUNT'])
      expect(help).toContain(v);
    for (const u of [diskMapper, boot])
      expect(values(u, 'EnvironmentFile')).toEqual(['/etc/confboot/node.env']);
  });
});
