/**
 * ComponentInstaller over HTTP(S): the step before kubeadm on init and on join. Each component is
 * streamed from its URL into a private temp file next to its install path while its SHA-256 is
 * computed; only when the hash equals the one the cluster vouches for is the file renamed into place
 * (or, for an archive, unpacked into the install directory by GNU tar). A download is bounded in
 * size and time and retried on transport errors; a hash mismatch is never retried, and it names the
 * component and both hashes.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, mkdir, mkdtemp, open, rename, rm } from 'node:fs/promises';
import { basename, dirname, isAbsolute, join, normalize } from 'node:path';
import { promisify } from 'node:util';
import type { ComponentInstaller, InstalledComponent } from '../../ports/component-installer.js';
import { ConfbootError, messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { CallOptions, Component } from '../../ports/types.js';

const execFileAsync = promisify(execFile);

/** Largest download accepted by default (kubelet and kubeadm are ~100 MB; CNI plugins ~50 MB). */
export const DEFAULT_MAX_COMPONENT_BYTES = 512 * 1024 * 1024;
/** Default deadline of one download attempt. */
export const DEFAULT_COMPONENT_TIMEOUT_MS = 5 * 60_000;
/** Default attempts per component (transport errors and HTTP 5xx only). */
export const DEFAULT_COMPONENT_ATTEMPTS = 3;
/** Default wait before the second attempt; doubled for each further one. */
export const DEFAULT_COMPONENT_RETRY_DELAY_MS = 1_000;

/** Options of {@link HttpComponentInstaller}. */
export interface HttpComponentInstallerOptions {
  /** Largest download in bytes; default 512 MiB. A larger body is cut off and refused. */
  maxBytes?: number;
  /** Deadline of one attempt (connect to last byte); default 5 minutes. */
  attemptTimeoutInMs?: number;
  /** Attempts per component; default 3. */
  attempts?: number;
  /** Wait before the second attempt, doubled each time; default 1 s. */
  retryDelayInMs?: number;
  /** GNU tar, for components with `extract`; default `tar` on PATH. */
  tarPath?: string;
  logger?: Logger;
}

/** A download failure worth another attempt (transport error, HTTP 5xx, timeout). */
class TransientDownloadError extends Error {}

const SHA256 = /^sha256:([0-9a-f]{64})$/;

/** Checks one entry of the list and returns its expected SHA-256 (hex). */
function checkComponent(c: Component, index: number): string {
  const what = `component ${index} (${c.installPath || 'no install path'})`;
  let url: URL;
  try {
    url = new URL(c.url);
  } catch {
    throw new ConfbootError('invalid-argument', `${what}: url ${JSON.stringify(c.url)} is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new ConfbootError('invalid-argument', `${what}: url scheme ${url.protocol} is not http(s)`);
  const m = SHA256.exec(c.hash.toLowerCase());
  if (!m)
    throw new ConfbootError(
      'invalid-argument',
      `${what}: hash ${JSON.stringify(c.hash)} is not "sha256:" and 64 hex digits`,
    );
  if (!isAbsolute(c.installPath) || normalize(c.installPath) !== c.installPath || c.installPath === '/')
    throw new ConfbootError(
      'invalid-argument',
      `${what}: install path must be absolute and normalised, got ${JSON.stringify(c.installPath)}`,
    );
  return m[1] as string;
}

/** SHA-256 (hex) of the file at `path`, or undefined when it does not exist. */
async function fileSha256(path: string): Promise<string | undefined> {
  try {
    const h = createHash('sha256');
    for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
    return h.digest('hex');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'EISDIR')
      return undefined;
    throw err;
  }
}

/** See the module header. */
export class HttpComponentInstaller implements ComponentInstaller {
  private readonly maxBytes: number;
  private readonly attemptTimeoutMs: number;
  private readonly attempts: number;
  private readonly retryDelayMs: number;

  constructor(private readonly options: HttpComponentInstallerOptions = {}) {
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_COMPONENT_BYTES;
    this.attemptTimeoutMs = options.attemptTimeoutInMs ?? DEFAULT_COMPONENT_TIMEOUT_MS;
    this.attempts = Math.max(1, options.attempts ?? DEFAULT_COMPONENT_ATTEMPTS);
    this.retryDelayMs = options.retryDelayInMs ?? DEFAULT_COMPONENT_RETRY_DELAY_MS;
  }

  async install(components: readonly Component[], call?: CallOptions): Promise<InstalledComponent[]> {
    // Every entry is checked before anything is fetched: a malformed list installs nothing.
    const expected = components.map((c, i) => checkComponent(c, i));
    const out: InstalledComponent[] = [];
    for (const [i, c] of components.entries()) {
      call?.signal?.throwIfAborted();
      out.push(await this.installOne(c, expected[i] as string, call));
    }
    return out;
  }

  private async installOne(c: Component, wantHex: string, call?: CallOptions): Promise<InstalledComponent> {
    const name = basename(c.installPath);
    // A plain file already in place with the agreed hash (a reboot) is not fetched again.
    if (!c.extract && (await fileSha256(c.installPath)) === wantHex) {
      this.options.logger?.info('Component present', { component: name, installPath: c.installPath });
      return { installPath: c.installPath, how: 'present' };
    }
    const targetDir = c.extract ? c.installPath : dirname(c.installPath);
    await mkdir(targetDir, { recursive: true });
    // The temp dir sits beside the target, so the final rename stays on one file system.
    const tmp = await mkdtemp(join(dirname(c.installPath), `.confboot-${name}-`));
    try {
      const file = join(tmp, 'download');
      const gotHex = await this.downloadWithRetries(c, name, file, call);
      if (gotHex !== wantHex)
        throw new ConfbootError(
          'failed-precondition',
          `component ${name} from ${c.url}: hash mismatch: expected sha256:${wantHex}, got sha256:${gotHex}; refusing to install it`,
          { recoverable: false },
        );
      if (c.extract) await this.extract(file, c.installPath, name);
      else {
        await chmod(file, 0o755);
        await rename(file, c.installPath);
      }
      this.options.logger?.info('Component installed', { component: name, installPath: c.installPath });
      return { installPath: c.installPath, how: 'downloaded' };
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
  }

  private async downloadWithRetries(
    c: Component,
    name: string,
    file: string,
    call?: CallOptions,
  ): Promise<string> {
    let delay = this.retryDelayMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.download(c, name, file, call);
      } catch (err) {
        if (!(err instanceof TransientDownloadError) || attempt >= this.attempts || call?.signal?.aborted)
          throw err instanceof TransientDownloadError
            ? new ConfbootError(
                'unavailable',
                `downloading component ${name} from ${c.url}: ${err.message} (after ${attempt} attempts)`,
              )
            : err;
        this.options.logger?.warn('Component download failed, retrying', {
          component: name,
          attempt,
          error: err.message,
        });
        await new Promise((r) => setTimeout(r, delay));
        delay *= 2;
      }
    }
  }

  /** One attempt: streams the body into `file`, bounded; resolves with its SHA-256 (hex). */
  private async download(c: Component, name: string, file: string, call?: CallOptions): Promise<string> {
    const signals = [AbortSignal.timeout(call?.timeoutInMs ?? this.attemptTimeoutMs)];
    if (call?.signal) signals.push(call.signal);
    const signal = AbortSignal.any(signals);
    let res: Response;
    try {
      res = await fetch(c.url, { signal, redirect: 'follow' });
    } catch (err) {
      if (call?.signal?.aborted) throw call.signal.reason;
      throw new TransientDownloadError(messageOf(err));
    }
    if (!res.ok || res.body === null) {
      await res.body?.cancel().catch(() => {});
      const msg = `HTTP ${res.status}`;
      if (res.status >= 500) throw new TransientDownloadError(msg);
      throw new ConfbootError('failed-precondition', `downloading component ${name} from ${c.url}: ${msg}`);
    }
    const announced = Number(res.headers.get('content-length') ?? Number.NaN);
    if (announced > this.maxBytes) {
      await res.body.cancel().catch(() => {});
      throw this.tooLarge(c, name, announced);
    }
    const hash = createHash('sha256');
    await rm(file, { force: true }); // a failed earlier attempt's partial file
    const fh = await open(file, 'wx', 0o600);
    let size = 0;
    try {
      for await (const chunk of res.body) {
        size += chunk.byteLength;
        if (size > this.maxBytes) throw this.tooLarge(c, name, size);
        hash.update(chunk);
        await fh.write(chunk);
      }
    } catch (err) {
      if (err instanceof ConfbootError) throw err;
      if (call?.signal?.aborted) throw call.signal.reason;
      throw new TransientDownloadError(messageOf(err));
    } finally {
      await fh.close();
    }
    return hash.digest('hex');
  }

  private tooLarge(c: Component, name: string, bytes: number): ConfbootError {
    return new ConfbootError(
      'failed-precondition',
      `downloading component ${name} from ${c.url}: larger than the limit of ${this.maxBytes} bytes (${bytes} or more)`,
    );
  }

  /** Unpacks a checked archive into `dir` with GNU tar (which refuses members outside `dir`). */
  private async extract(archive: string, dir: string, name: string): Promise<void> {
    try {
      await execFileAsync(
        this.options.tarPath ?? 'tar',
        ['-x', '-f', archive, '-C', dir, '--no-same-owner'],
        {
          maxBuffer: 1024 * 1024,
        },
      );
    } catch (err) {
      throw new ConfbootError(
        'failed-precondition',
        `unpacking component ${name} into ${dir}: ${messageOf(err)}`,
        {
          cause: err,
        },
      );
    }
  }
}
