/**
 * ClusterJoiner and ClusterInitializer on the kubeadm binary: the last step of a join
 * and of the first control plane's init. The configuration is rendered by
 * kubeadm-config.ts, written to a private temp file (it holds the bootstrap token) and passed with
 * `--config`; kubeadm's combined output, with the token redacted, travels in the error on failure.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { ClusterInitializer, InitClusterArgs } from '../../ports/cluster-initializer.js';
import type { ClusterJoiner, JoinClusterArgs } from '../../ports/cluster-joiner.js';
import type { ComponentInstaller } from '../../ports/component-installer.js';
import { ConfbootError, isConfbootError } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { CallOptions, Component } from '../../ports/types.js';
import { importOptionalPeer } from '../system/optional-peer.js';
import {
  type KubeadmInitRenderOptions,
  type KubeadmRenderOptions,
  renderInitConfiguration,
  renderJoinConfiguration,
} from './kubeadm-config.js';

/** Upstream's `joinTimeout`: the whole kubeadm join phase may take 5 minutes. */
export const DEFAULT_KUBEADM_JOIN_TIMEOUT_MS = 5 * 60_000;
/** Where kubeadm init writes the admin kubeconfig (upstream `ControlPlaneAdminConfFilename`). */
export const DEFAULT_ADMIN_CONF_PATH = '/etc/kubernetes/admin.conf';
/** Most output kept for the error (the tail is what explains a failure). */
const MAX_OUTPUT_BYTES = 256 * 1024;
/** Time between SIGTERM and SIGKILL when kubeadm must stop. */
const KILL_GRACE_MS = 2_000;
const REDACTED = '<redacted>';

/** How to run kubeadm. */
export interface KubeadmRunOptions {
  /** kubeadm binary; default `kubeadm`, looked up on PATH (the PATH of `env` when given). */
  kubeadmPath?: string;
  /** Default deadline of one kubeadm run when the caller gives no `timeoutInMs`; default 5 minutes. */
  timeoutInMs?: number;
  /** Environment of kubeadm; default this process's. */
  env?: NodeJS.ProcessEnv;
  /** Where the private config directory is created; default the OS temp dir. */
  tmpDir?: string;
  /** Extra arguments after `--config F`, e.g. `['--v=5']`. */
  extraArgs?: string[];
  /** Where to log progress (never the token). */
  logger?: Logger;
  /**
   * Installs the components the cluster vouches for, hash-checked, before kubeadm runs. Without
   * one, a non-empty component list is refused: nothing unchecked may run.
   */
  componentInstaller?: ComponentInstaller;
}

/** Installs `components` through the configured installer before kubeadm runs (see the option). */
async function installComponents(
  components: readonly Component[],
  run: KubeadmRunOptions,
  call: CallOptions | undefined,
): Promise<void> {
  if (components.length === 0) return;
  if (run.componentInstaller === undefined)
    throw new ConfbootError(
      'failed-precondition',
      `installing ${components.length} Kubernetes components: no component installer configured`,
    );
  await run.componentInstaller.install(components, call?.signal ? { signal: call.signal } : {});
}

/** kubeadm failed: `output` is its combined stdout and stderr, with the bootstrap token redacted. */
export class KubeadmError extends ConfbootError {
  override readonly name = 'KubeadmError';
  constructor(
    message: string,
    /** `join` or `init`. */
    readonly subcommand: string,
    /** Exit code, or null when kubeadm was killed. */
    readonly exitCode: number | null,
    /** Combined output (tail, at most 256 KiB), secrets redacted. */
    readonly output: string,
    options: { code?: 'internal' | 'deadline-exceeded'; recoverable?: boolean } = {},
  ) {
    super(options.code ?? 'internal', message, { recoverable: options.recoverable ?? true });
  }
}

/** Type guard for {@link KubeadmError}. */
export function isKubeadmError(err: unknown): err is KubeadmError {
  return err instanceof KubeadmError;
}

/** Replaces every secret (and, for a bootstrap token, its secret half) with `<redacted>`. */
export function redact(text: string, secrets: string[]): string {
  let out = text;
  const parts = secrets.flatMap((s) => [s, ...(s.includes('.') ? [s.slice(s.indexOf('.') + 1)] : [])]);
  for (const s of parts.filter((p) => p.length >= 4).sort((a, b) => b.length - a.length))
    out = out.split(s).join(REDACTED);
  return out;
}

interface RunResult {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  output: string;
  timedOut: boolean;
}

/** Runs `kubeadm <subcommand> --config <file>` with `config` in a 0600 file that is removed afterwards. */
async function runKubeadm(
  subcommand: 'join' | 'init',
  config: string,
  secrets: string[],
  run: KubeadmRunOptions,
  call: CallOptions | undefined,
): Promise<string> {
  const signal = call?.signal;
  signal?.throwIfAborted();
  const bin = run.kubeadmPath ?? 'kubeadm';
  const timeoutMs = call?.timeoutInMs ?? run.timeoutInMs ?? DEFAULT_KUBEADM_JOIN_TIMEOUT_MS;
  const operation = `running kubeadm ${subcommand}`;
  const dir = await mkdtemp(join(run.tmpDir ?? tmpdir(), 'confboot-kubeadm-'));
  try {
    const file = join(dir, `${subcommand}-config.yaml`);
    await writeFile(file, config, { mode: 0o600, flag: 'wx' });
    const args = [subcommand, '--config', file, ...(run.extraArgs ?? [])];
    run.logger?.info('Running kubeadm', { subcommand, kubeadm: bin, timeoutMs });
    const result = await new Promise<RunResult>((resolve, reject) => {
      const child = spawn(bin, args, { env: run.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
      const chunks: Buffer[] = [];
      let size = 0;
      const collect = (c: Buffer) => {
        chunks.push(c);
        size += c.length;
        while (size > MAX_OUTPUT_BYTES && chunks.length > 1) size -= (chunks.shift() as Buffer).length;
      };
      child.stdout.on('data', collect);
      child.stderr.on('data', collect);
      let timedOut = false;
      let killTimer: NodeJS.Timeout | undefined;
      const stop = () => {
        child.kill('SIGTERM');
        killTimer ??= setTimeout(() => child.kill('SIGKILL'), KILL_GRACE_MS);
      };
      const deadline = setTimeout(() => {
        timedOut = true;
        stop();
      }, timeoutMs);
      const onAbort = () => stop();
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => {
        clearTimeout(deadline);
        clearTimeout(killTimer);
        signal?.removeEventListener('abort', onAbort);
      };
      child.once('error', (err: NodeJS.ErrnoException) => {
        done();
        const why = err.code === 'ENOENT' ? `kubeadm binary "${bin}" not found` : err.message;
        reject(new ConfbootError('failed-precondition', `${operation}: ${why}`, { cause: err }));
      });
      child.once('close', (exitCode, sig) => {
        done();
        resolve({ exitCode, signal: sig, output: Buffer.concat(chunks).toString('utf8'), timedOut });
      });
    });
    const output = redact(result.output, secrets);
    if (signal?.aborted) throw signal.reason;
    if (result.timedOut)
      throw new KubeadmError(
        `${operation}: timed out after ${timeoutMs} ms\n${tail(output)}`,
        subcommand,
        result.exitCode,
        output,
        { code: 'deadline-exceeded' },
      );
    if (result.exitCode !== 0) {
      const how = result.exitCode === null ? `killed by ${result.signal}` : `exit code ${result.exitCode}`;
      run.logger?.warn('kubeadm failed', { subcommand, exitCode: result.exitCode });
      throw new KubeadmError(`${operation} (${how}): ${tail(output)}`, subcommand, result.exitCode, output);
    }
    run.logger?.info('kubeadm finished', { subcommand });
    return output;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The last 4 KiB of kubeadm's output, trimmed, for error messages. */
function tail(output: string): string {
  const t = output.trim();
  return t.length <= 4096 ? t : `…${t.slice(-4096)}`;
}

/** Options of {@link KubeadmJoiner}. */
export interface KubeadmJoinerOptions extends KubeadmRunOptions, KubeadmRenderOptions {
  /**
   * Where the kubelet looks for the key of its TLS-bootstrap CSR ({@link KUBELET_BOOTSTRAP_KEY_PATH});
   * when set, the join ticket's kubelet key is written there before `kubeadm join`, so the client
   * CSR carries the key the join service recorded for this node (the node operator approves only
   * that). Unset: nothing is written.
   */
  kubeletBootstrapKeyPath?: string;
}

/** The kubelet's key for its bootstrap CSR: it reuses this file when it exists (`--cert-dir` default). */
export const KUBELET_BOOTSTRAP_KEY_PATH = '/var/lib/kubelet/pki/kubelet-client.key.tmp';

/** {@link ClusterJoiner} that runs `kubeadm join --config F`. One call runs kubeadm once. */
export class KubeadmJoiner implements ClusterJoiner {
  constructor(private readonly options: KubeadmJoinerOptions = {}) {}

  /**
   * Joins the cluster. Rejects with a {@link KubeadmError} carrying kubeadm's output (token
   * redacted; `recoverable`, as a later attempt may succeed), `deadline-exceeded` after the
   * timeout, `failed-precondition` when kubeadm is missing, or the signal's reason on abort.
   */
  async joinCluster(args: JoinClusterArgs, options?: CallOptions): Promise<void> {
    const config = renderJoinConfiguration(args, this.options);
    await installComponents(args.components, this.options, options);
    const keyPath = this.options.kubeletBootstrapKeyPath;
    if (keyPath !== undefined && args.kubeletKeyPath !== '') {
      await mkdir(dirname(keyPath), { recursive: true, mode: 0o700 });
      await writeFile(keyPath, await readFile(args.kubeletKeyPath), { mode: 0o600 });
    }
    await runKubeadm('join', config, [args.token], this.options, options);
  }
}

/** Options of {@link KubeadmInitializer}. */
export interface KubeadmInitializerOptions extends KubeadmRunOptions, KubeadmInitRenderOptions {
  /** Admin kubeconfig kubeadm writes; default `/etc/kubernetes/admin.conf`. */
  adminConfPath?: string;
  /**
   * Removes kubeadm's auto-approval of bootstrap-token node client certificates once `kubeadm
   * init` succeeded, given the admin kubeconfig path; default: deletes the ClusterRoleBinding
   * `kubeadm:node-autoapprove-bootstrap` through the Kubernetes API with that kubeconfig.
   */
  removeNodeAutoApproval?: (adminConfPath: string) => Promise<void>;
}

/** Deletes kubeadm's node auto-approval binding with the admin kubeconfig at `path`. */
async function removeNodeAutoApprovalWith(path: string, logger: Logger | undefined): Promise<void> {
  // Loaded here: @kubernetes/client-node is slow to import and only init needs it on a node.
  const [api, tokens] = await importOptionalPeer(() =>
    Promise.all([import('./api.js'), import('./bootstrap-tokens.js')]),
  );
  await tokens.removeBootstrapTokenAutoApproval(api.loadKubeConfig(path), logger ? { logger } : {});
}

/**
 * {@link ClusterInitializer} that runs `kubeadm init --config F`, removes kubeadm's auto-approval of
 * bootstrap-token node client certificates (confboot signs kubelet certificates itself, after its own
 * checks; every join ticket's bootstrap token is in the group that binding serves), and returns
 * admin.conf. Not skipped through `--skip-phases=bootstrap-token`: that phase has no sub-phases and
 * also creates the cluster-info ConfigMap and the RBAC rules that `kubeadm join` needs.
 */
export class KubeadmInitializer implements ClusterInitializer {
  constructor(private readonly options: KubeadmInitializerOptions = {}) {}

  /** Initialises the cluster; errors as {@link KubeadmJoiner.joinCluster}. Resolves to the admin kubeconfig. */
  async initCluster(args: InitClusterArgs, options?: CallOptions): Promise<Uint8Array> {
    const config = renderInitConfiguration(args, this.options);
    await installComponents(args.components, this.options, options);
    await runKubeadm('init', config, [], this.options, options);
    const path = this.options.adminConfPath ?? DEFAULT_ADMIN_CONF_PATH;
    let kubeconfig: Uint8Array;
    try {
      kubeconfig = new Uint8Array(await readFile(path));
    } catch (err) {
      throw new ConfbootError(
        'internal',
        `reading admin kubeconfig ${path} after kubeadm init: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    const remove =
      this.options.removeNodeAutoApproval ??
      ((p: string) => removeNodeAutoApprovalWith(p, this.options.logger));
    try {
      await remove(path);
    } catch (err) {
      // Fails closed: a cluster whose bootstrap tokens may still get node certificates approved is
      // not handed to the operator as initialised.
      throw new ConfbootError(
        isConfbootError(err) ? err.code : 'unavailable',
        `removing kubeadm's auto-approval of bootstrap-token node certificates after kubeadm init: ${(err as Error).message}`,
        { cause: err },
      );
    }
    return kubeconfig;
  }
}
