/**
 * A software TPM (swtpm) as a child process, for tests and the local demo. Where it sits: it gives
 * the tpm2-tools adapter (tpm2-tools-tpm.ts) a real TPM 2.0 to talk to when no /dev/tpmrm0 exists.
 *
 * swtpm runs in the foreground (no --daemon) so this process owns it and can always stop it; it
 * listens for TPM commands on `port` and for control commands on `ctrlPort = port + 1`, both on
 * loopback. swtpm has no resource manager: every client must flush its transient objects.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfbootError } from '../../ports/errors.js';

/** Options for {@link startSwtpm}. */
export interface SwtpmOptions {
  /** TPM state directory; kept on stop. Default: a fresh temp dir, removed on stop. */
  stateDir?: string;
  /** Loopback address to bind, default `127.0.0.1`. */
  host?: string;
  /** How long to wait for swtpm to accept connections, default 5000 ms. */
  readyTimeoutInMs?: number;
  /** The swtpm executable, default `swtpm` from PATH. */
  swtpmPath?: string;
}

/** A running swtpm. */
export interface SwtpmInstance {
  /** Address both sockets are bound to. */
  host: string;
  /** TCP port for TPM commands. */
  port: number;
  /** TCP port for swtpm control commands (always `port + 1`, as the swtpm TCTI expects). */
  ctrlPort: number;
  /** TCTI string for tpm2-tools, e.g. `swtpm:host=127.0.0.1,port=P`. */
  tcti: string;
  /** The TPM state directory. */
  stateDir: string;
  /** Process ID of swtpm. */
  pid: number;
  /** Stops swtpm (SIGTERM, then SIGKILL after 2 s) and removes the state dir if it was created here. Idempotent. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
let exitHookInstalled = false;

/** Kills every swtpm still running when this process exits, so none outlives a crashed test. */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
}

/** Returns a port P such that P and P+1 were both free on `host` a moment ago. */
async function freePortPair(host: string): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await listenOnce(host, 0);
    if (port === undefined || port >= 65535) continue;
    if ((await listenOnce(host, port + 1)) !== undefined) return port;
  }
  throw new ConfbootError('unavailable', `starting swtpm: no free pair of adjacent ports on ${host}`);
}

/** Binds `port` (0 = any) and releases it; returns the port or undefined if it was taken. */
function listenOnce(host: string, port: number): Promise<number | undefined> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(undefined));
    srv.listen(port, host, () => {
      const addr = srv.address();
      srv.close(() => resolve(addr && typeof addr === 'object' ? addr.port : undefined));
    });
  });
}

/** True once a TCP connection to host:port succeeds. */
function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    sock.setTimeout(500);
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('timeout', () => {
      sock.destroy();
      resolve(false);
    });
    sock.once('error', () => resolve(false));
  });
}

/** Waits for the child to exit, at most `ms`; returns whether it exited. */
function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

/**
 * Starts `swtpm socket --tpm2` on free loopback ports and waits (bounded) until both sockets accept
 * connections. The TPM is started (`startup-clear`), so tpm2-tools can use it at once.
 */
export async function startSwtpm(options: SwtpmOptions = {}): Promise<SwtpmInstance> {
  const host = options.host ?? '127.0.0.1';
  const readyTimeoutInMs = options.readyTimeoutInMs ?? 5000;
  const ownStateDir = options.stateDir === undefined;
  const stateDir = options.stateDir ?? mkdtempSync(join(tmpdir(), 'confboot-swtpm-'));
  if (!ownStateDir) mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  installExitHook();

  let lastError = '';
  // Another process may grab a port between our probe and swtpm's bind; then swtpm exits and we retry.
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = await freePortPair(host);
    const ctrlPort = port + 1;
    const child = spawn(
      options.swtpmPath ?? 'swtpm',
      [
        'socket',
        '--tpm2',
        '--tpmstate',
        `dir=${stateDir}`,
        '--server',
        `type=tcp,port=${port},bindaddr=${host}`,
        '--ctrl',
        `type=tcp,port=${ctrlPort},bindaddr=${host}`,
        '--flags',
        'not-need-init,startup-clear',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    live.add(child);
    let stderr = '';
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      if (stderr.length < 8192) stderr += chunk;
    });
    let spawnError: Error | undefined;
    child.once('error', (err) => {
      spawnError = err;
    });
    child.once('exit', () => live.delete(child));

    const deadline = Date.now() + readyTimeoutInMs;
    let ready = false;
    while (Date.now() < deadline) {
      if (spawnError || child.exitCode !== null || child.signalCode !== null) break;
      if ((await canConnect(host, ctrlPort)) && (await canConnect(host, port))) {
        ready = true;
        break;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    if (ready && child.pid !== undefined) {
      const pid = child.pid;
      let stopped: Promise<void> | undefined;
      const stop = (): Promise<void> => {
        stopped ??= (async () => {
          child.kill('SIGTERM');
          if (!(await waitExit(child, 2000))) {
            child.kill('SIGKILL');
            await waitExit(child, 2000);
          }
          live.delete(child);
          if (ownStateDir) rmSync(stateDir, { recursive: true, force: true });
        })();
        return stopped;
      };
      return { host, port, ctrlPort, tcti: `swtpm:host=${host},port=${port}`, stateDir, pid, stop };
    }

    const exitedEarly = child.exitCode !== null || child.signalCode !== null;
    child.kill('SIGKILL');
    await waitExit(child, 2000);
    live.delete(child);
    if (spawnError) {
      if (ownStateDir) rmSync(stateDir, { recursive: true, force: true });
      throw new ConfbootError('internal', `starting swtpm: ${spawnError.message}`, { cause: spawnError });
    }
    lastError = stderr.trim() || `not ready within ${readyTimeoutInMs} ms`;
    // Only a lost port race is worth retrying; a timeout or any other failure is not.
    if (!exitedEarly || !/bind|address already in use/i.test(stderr)) break;
  }
  if (ownStateDir) rmSync(stateDir, { recursive: true, force: true });
  throw new ConfbootError('unavailable', `starting swtpm on ${host}: ${lastError}`);
}
