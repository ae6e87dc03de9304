/**
 * `confboot copy-pki`, the join service's init container, run for real: as root it copies exactly
 * the eight control-plane pki files from root-only (0600) host files, owned by 65532 with mode 0400,
 * and 65532 reads them; a missing source writes nothing; and the built CLI does it with only the
 * two capabilities the manifests grant (CHOWN and FOWNER), while without FOWNER the kernel refuses,
 * as it would in the pod.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { run } from '../../../src/app/cli/copy-pki.js';
import { pkiCopyArgs } from '../../../src/app/manifests/join-service.js';
import { CONTROL_PLANE_FILE_NAMES } from '../../../src/ports/kubernetes-node.js';
import { captureStdio } from '../../support/stdio.js';
import { useTmpDirs } from '../../support/tmp.js';

const stdio = captureStdio();
const tmp = useTmpDirs('confboot-copy-pki-');
const root = process.getuid?.() === 0;
const DIST_CLI = resolve(import.meta.dirname, '../../../dist/src/app/cli/main.js');

/** kubeadm's pki directory as it leaves it: root-owned, 0600, plus files the service must not get. */
function hostPki(): { base: string; host: string } {
  const base = tmp();
  // The service's user must reach the copies (as it reaches the pod's volume mount).
  chmodSync(base, 0o755);
  const host = join(base, 'host-pki');
  mkdirSync(join(host, 'etcd'), { recursive: true });
  for (const f of [...CONTROL_PLANE_FILE_NAMES, 'apiserver.key', 'etcd/server.key']) {
    writeFileSync(join(host, f), `content of ${f}\n`);
    chmodSync(join(host, f), 0o600);
  }
  return { base, host };
}

/** Files (not directories) under `dir`, relative, sorted. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}

/** The init container's arguments for these directories, without the command name. */
const argsFor = (from: string, to: string) => pkiCopyArgs(from, to).slice(1);

describe('confboot copy-pki', () => {
  it('is what the manifests run: copy-pki with the host mount, the pod volume, 65532:65532 and 0400', () => {
    expect(pkiCopyArgs('/a', '/b')).toEqual([
      'copy-pki',
      '--from',
      '/a',
      '--to',
      '/b',
      '--owner',
      '65532:65532',
      '--mode',
      '0400',
    ]);
  });

  it.skipIf(!root)(
    'copies exactly the eight files, owned by 65532 with mode 0400, and 65532 can read them',
    async () => {
      const { base, host } = hostPki();
      const pod = join(base, 'pod-pki');
      expect(await run(argsFor(host, pod))).toBe(0);
      expect(stdio.stdout()).toBe(`copied 8 files to ${pod} (owner 65532:65532, mode 0400)\n`);
      expect(filesUnder(pod)).toEqual([...CONTROL_PLANE_FILE_NAMES].sort());
      for (const f of filesUnder(pod)) {
        const st = statSync(join(pod, f));
        expect([st.uid, st.gid, st.mode & 0o777], f).toEqual([65532, 65532, 0o400]);
      }
      // Read back as the service's user with the system's `cat` (the clone's Node may sit in a
      // directory 65532 cannot search, which says nothing about the copies).
      const asService = { uid: 65532, gid: 65532, encoding: 'utf8' } as const;
      expect(execFileSync('cat', [join(pod, 'ca.key')], asService)).toBe('content of ca.key\n');
      expect(execFileSync('cat', [join(pod, 'etcd/ca.key')], asService)).toBe('content of etcd/ca.key\n');
    },
  );

  it('writes nothing when a source is missing (exit 1, naming it), and refuses a bad owner (exit 2)', async () => {
    const { base, host } = hostPki();
    rmSync(join(host, 'sa.pub'));
    const pod = join(base, 'pod-pki');
    expect(await run(argsFor(host, pod))).toBe(1);
    expect(stdio.stderr()).toContain(`reading ${join(host, 'sa.pub')}: ENOENT; nothing was copied`);
    expect(existsSync(pod)).toBe(false);
    expect(await run(['--from', host, '--to', pod, '--owner', 'confboot'])).toBe(2);
    expect(stdio.stderr()).toContain('--owner must be UID:GID');
    expect(await run(['--from', host, '--to', pod, '--mode', '0999'])).toBe(2);
  });

  it('prints one JSON envelope with -o json', async () => {
    if (!root) return;
    const { base, host } = hostPki();
    const pod = join(base, 'pod-pki');
    expect(await run([...argsFor(host, pod), '-o', 'json'])).toBe(0);
    const env = JSON.parse(stdio.stdout()) as {
      command: string;
      status: string;
      result: { files: string[] };
    };
    expect(env).toMatchObject({ command: 'copy-pki', status: 'ok' });
    expect(env.result.files).toHaveLength(8);
  });

  const canDropCaps = root && spawnSync('setpriv', ['--version']).status === 0 && existsSync(DIST_CLI);
  it.skipIf(!canDropCaps)(
    'the built CLI copies with only CHOWN and FOWNER (as the pod grants), and fails without FOWNER',
    () => {
      const { base, host } = hostPki();
      const withCaps = (caps: string, to: string) =>
        spawnSync(
          'setpriv',
          [`--bounding-set=-all,${caps}`, process.execPath, DIST_CLI, 'copy-pki', ...argsFor(host, to)],
          { encoding: 'utf8', timeout: 60_000 },
        );
      const ok = withCaps('+chown,+fowner', join(base, 'pod'));
      expect(ok.status, ok.stderr).toBe(0);
      expect(filesUnder(join(base, 'pod'))).toEqual([...CONTROL_PLANE_FILE_NAMES].sort());
      const refused = withCaps('+chown', join(base, 'pod-without-fowner'));
      expect(refused.status).toBe(1);
      expect(refused.stderr).toMatch(/EPERM/);
    },
  );
});
