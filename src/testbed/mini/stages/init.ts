/**
 * Stage `init`: the operator's `confboot init` from the host side of the bridge (inside the
 * namespace), once the control plane runs the bootstrapper. The init entry verifies the control
 * plane's quote (expected measurements and the AK the host registered for it) before it sends the
 * master secret, then creates the master-secret Secret through the SIMULATED API server over TLS
 * verified against the cluster CA from init, and checks it reads back equal.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { bundleEntry } from '../bundle.js';
import type { MiniCluster } from '../context.js';
import type { InitEntryInput } from '../host/init-entry.js';
import type { MiniResult } from '../types.js';
import { followBoot } from './boot-evidence.js';

const require = createRequire(import.meta.url);

/** Where the operator keeps the admin kubeconfig init returned (in the run's work directory). */
export function adminKubeconfigPath(c: MiniCluster): string {
  return join(c.workDir, 'admin.conf');
}

/** The cluster's secrets as the operator holds them after init. */
export interface MiniSecrets {
  masterSecret: Buffer;
  masterSalt: Buffer;
  clusterId: Buffer;
}

/**
 * Runs host entry `entry` (e.g. `host/init-entry`, bundled once per run) inside the namespace with
 * `input` on stdin; resolves to the last JSON line it printed, or `{ ok: false, error }`. Its
 * stderr goes to `<workDir>/<logName>`.
 */
export async function runHostEntry<T extends { ok?: boolean; error?: string }>(
  c: MiniCluster,
  entry: string,
  input: unknown,
  logName: string,
): Promise<T> {
  const bundle = join(c.workDir, `${entry.replace(/^host\//, '')}.mjs`);
  if (!existsSync(bundle)) await writeFile(bundle, await bundleEntry(entry));
  return new Promise((resolve) => {
    // The bundle still resolves @grpc/grpc-js/package.json (grpc-js's version) at run time.
    const nodeModules = join(dirname(require.resolve('@grpc/grpc-js/package.json')), '..', '..');
    const child: ChildProcess = spawn('ip', ['netns', 'exec', c.network.netns, process.execPath, bundle], {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: { ...process.env, NODE_PATH: nodeModules },
    });
    c.track(child.pid, entry);
    let out = '';
    let err = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr?.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.on('error', (e) => resolve({ ok: false, error: e.message } as T));
    child.on('close', () => {
      void appendFile(join(c.workDir, logName), err).catch(() => {});
      const last = out.trim().split('\n').pop() ?? '';
      try {
        resolve(JSON.parse(last) as T);
      } catch {
        resolve({ ok: false, error: `${entry} gave no result: ${err.trim().slice(-400)}` } as T);
      }
    });
    child.stdin?.end(JSON.stringify(input));
  });
}

/** What a scenario adds to the init stage (several control planes: src/testbed/mini/ha.ts). */
export interface InitStageExtras {
  /** The bring-up after init, through the kubeconfig init returned (instead of the master-secret upload). */
  bringUp?: InitEntryInput['bringUp'];
  /** Awaited after a successful init, before the control plane counts as initialised. */
  afterInit?: () => Promise<void>;
  /** The progress line after init (default: the master-secret upload's). */
  doneText?: (init: NonNullable<MiniResult['init']>) => string;
}

/**
 * Follows the control plane's boot, then runs the operator's init against it. Resolves to the
 * outcome and, when init succeeded, the operator's secrets; marks the control plane failed otherwise.
 */
export async function initStage(
  c: MiniCluster,
  extras: InitStageExtras = {},
): Promise<{ init: MiniResult['init']; secrets: MiniSecrets | undefined }> {
  const cp = c.controlPlane;
  let init: MiniResult['init'];
  try {
    await followBoot(c, cp.name);
    const masterSecret = randomBytes(32);
    const masterSalt = randomBytes(32);
    const cpIp = c.result(cp.name).ip;
    c.progress(`operator         confboot init → ${cpIp}:9000 (verifying the control plane's quote first)`);
    const input: InitEntryInput = {
      endpoint: `${cpIp}:9000`,
      attestationConfig: c.expected.attestationConfig,
      akRegistryPath: c.identitiesFile,
      masterSecret: masterSecret.toString('base64'),
      masterSalt: masterSalt.toString('base64'),
      measurementSalt: randomBytes(32).toString('base64'),
      initSecret: c.initSecret.toString('base64'),
      timeoutMs: c.remaining(),
      ...(extras.bringUp ? { bringUp: extras.bringUp } : {}),
      kubeconfigPath: adminKubeconfigPath(c),
    };
    init = await runHostEntry<NonNullable<MiniResult['init']>>(c, 'host/init-entry', input, 'init.log');
    const r = c.result(cp.name);
    if (!init?.ok) {
      r.refusedBy = 'init';
      throw new Error(
        init?.clusterId === undefined
          ? `confboot init failed: ${init?.error ?? 'no outcome'}`
          : `init ran, but the master secret is not the operator's: ${init.error ?? 'no outcome'}`,
      );
    }
    await extras.afterInit?.();
    c.progress(
      extras.doneText?.(init) ??
        `operator         init done: cluster ID ${init.clusterId?.slice(0, 16)}…; master-secret Secret created over TLS (API server certificate verified against the cluster CA from init) and read back equal`,
    );
    r.accepted = true;
    r.reason = 'initialised the cluster (the operator verified its quote before sending the master secret)';
    c.say(cp.name, 'initialized');
    return {
      init,
      secrets: { masterSecret, masterSalt, clusterId: Buffer.from(init.clusterId ?? '', 'hex') },
    };
  } catch (err) {
    c.fail(cp.name, err);
    return { init, secrets: undefined };
  }
}
