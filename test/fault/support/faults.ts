/**
 * Fault injectors for the fault-injection suite (test code only): a `cryptsetup` wrapper script
 * that fails chosen subcommands a given number of times before handing over to the real binary, an
 * HTTP proxy in front of the QEMU metadata server that can stall requests (it forwards each request
 * from the caller's own 127.0.0.x source address, so the server still tells nodes apart), a key
 * service wrapper that can hold key derivations at a gate, and bounded waiting.
 */
import { execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import { isIPv4 } from 'node:net';
import { join } from 'node:path';
import { MEASUREMENT_SECRET_KEY_ID } from '../../../src/domain/key-derivation.js';
import { SSH_CA_KEY_ID } from '../../../src/domain/ssh-ca.js';
import type { KMS } from '../../../src/ports/kms.js';

/** Waits (bounded) until `cond` holds, polling every 25 ms; the error names what was awaited. */
export async function waitUntil(
  what: string,
  cond: () => boolean | Promise<boolean>,
  maxMs: number,
): Promise<void> {
  const until = Date.now() + maxMs;
  while (!(await cond())) {
    if (Date.now() > until) throw new Error(`timed out after ${maxMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Resolves with how `p` settled, or rejects after `maxMs` naming `what`. */
export async function settleWithin<T>(
  what: string,
  p: Promise<T>,
  maxMs: number,
): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${maxMs} ms waiting for ${what}`)), maxMs);
  });
  try {
    return await Promise.race([
      p.then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

const REAL_CRYPTSETUP = (() => {
  try {
    return execFileSync('sh', ['-c', 'command -v cryptsetup'], { encoding: 'utf8' }).trim();
  } catch {
    return 'cryptsetup';
  }
})();

/**
 * A `cryptsetup` wrapper for one node. `failNext(sub, n)` makes the next `n` invocations of
 * subcommand `sub` (the first argument: `luksDump`, `luksChangeKey`, `token`, `luksUUID`, …) exit 1
 * with an "injected failure" message WITHOUT running cryptsetup; `n = -1` fails until `clear()`.
 * `failAfterNext(sub, n)` runs the real cryptsetup and then reports failure (a command that did
 * its work but whose success was lost). Every invocation is recorded with its exit status.
 */
export class CryptsetupWrapper {
  /** The executable to pass as CryptsetupDisk's `binary`. */
  readonly path: string;
  readonly #dir: string;
  readonly #log: string;

  constructor(dir: string) {
    this.#dir = dir;
    this.path = join(dir, 'cryptsetup');
    this.#log = join(dir, 'invocations.log');
    writeFileSync(
      this.path,
      `#!/bin/sh
# Fault-injection wrapper around ${REAL_CRYPTSETUP} (confboot test suite).
sub="$1"
dir='${dir}'
take() {
  f="$dir/$1-$sub"
  [ -f "$f" ] || return 1
  n=$(cat "$f")
  [ "$n" = 0 ] && return 1
  [ "$n" -gt 0 ] && echo $((n - 1)) > "$f"
  return 0
}
if take fail; then
  echo "$sub injected-failure" >> "$dir/invocations.log"
  echo "cryptsetup: injected failure of $sub (fault-injection test)" >&2
  exit 1
fi
if take failafter; then
  ${REAL_CRYPTSETUP} "$@"
  echo "$sub ran-then-injected-failure($?)" >> "$dir/invocations.log"
  echo "cryptsetup: injected failure of $sub after it ran (fault-injection test)" >&2
  exit 1
fi
${REAL_CRYPTSETUP} "$@"
rc=$?
echo "$sub $rc" >> "$dir/invocations.log"
exit $rc
`,
    );
    chmodSync(this.path, 0o755);
    appendFileSync(this.#log, '');
  }

  /** The next `times` runs of `sub` fail without running cryptsetup (-1: until {@link clear}). */
  failNext(sub: string, times: number): void {
    writeFileSync(join(this.#dir, `fail-${sub}`), `${times}\n`);
  }

  /** The next `times` runs of `sub` run cryptsetup and then exit 1 anyway. */
  failAfterNext(sub: string, times: number): void {
    writeFileSync(join(this.#dir, `failafter-${sub}`), `${times}\n`);
  }

  /** Stops every injected failure. */
  clear(): void {
    for (const kind of ['fail', 'failafter'])
      for (const sub of ['luksDump', 'luksUUID', 'luksChangeKey', 'token']) {
        rmSync(join(this.#dir, `${kind}-${sub}`), { force: true });
      }
  }

  /** Recorded invocations as `<subcommand> <status>` lines. */
  invocations(): string[] {
    if (!existsSync(this.#log)) return [];
    return readFileSync(this.#log, 'utf8').split('\n').filter(Boolean);
  }

  /** How many invocations failed by injection. */
  injected(): number {
    return this.invocations().filter((l) => l.includes('injected')).length;
  }
}

/**
 * An HTTP proxy in front of the metadata server. Requests whose path `stall(path)` accepts are
 * held without an answer (the caller's deadline must fire); the others are forwarded from the
 * caller's own loopback address. `close()` drops held requests and stops listening.
 */
export class StallingMetadataProxy {
  /** Requests held so far, per path. */
  readonly stalled = new Map<string, number>();
  /** Requests forwarded so far. */
  forwarded = 0;
  /** Which paths to hold; default none. */
  stall: (path: string) => boolean = () => false;
  readonly #server = createServer((req, res) => this.#handle(req, res));
  #port = 0;

  constructor(private readonly upstreamPort: number) {}

  /** Listens on 127.0.0.1 and resolves with the port. */
  async listen(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(0, '127.0.0.1', () => resolve());
    });
    const addr = this.#server.address();
    this.#port = addr !== null && typeof addr === 'object' ? addr.port : 0;
    return this.#port;
  }

  /** How many requests were held in all. */
  get stalledTotal(): number {
    return [...this.stalled.values()].reduce((a, b) => a + b, 0);
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const path = new URL(req.url ?? '/', 'http://proxy').pathname;
    if (this.stall(path)) {
      this.stalled.set(path, (this.stalled.get(path) ?? 0) + 1);
      return; // never answered; the caller times out and closes, or close() drops it
    }
    this.forwarded++;
    const remote = req.socket.remoteAddress ?? '127.0.0.1';
    const localAddress = remote.startsWith('::ffff:') && isIPv4(remote.slice(7)) ? remote.slice(7) : remote;
    const up = request(
      {
        host: '127.0.0.1',
        port: this.upstreamPort,
        path: req.url,
        method: req.method,
        headers: req.headers,
        localAddress,
        agent: false,
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      },
    );
    up.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`metadata proxy: ${err.message}\n`);
    });
    req.pipe(up);
  }

  /** Drops every held request and stops listening. */
  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/**
 * A KMS that passes the first `passFirst` calls straight through and holds the rest at a gate
 * until {@link GateKms.open}; used to keep ticket requests in flight while a service goes away.
 */
/**
 * For {@link GateKms.holdAfter}: counts and holds only state disk keys (a disk UUID per request), not
 * the measurement secret or the emergency SSH CA's seed, which every request asks for besides.
 */
export const stateDiskKeys = (dataKeyId: string): boolean =>
  dataKeyId !== MEASUREMENT_SECRET_KEY_ID && dataKeyId !== SSH_CA_KEY_ID;

export class GateKms implements KMS {
  /** Calls counted so far (see {@link holdAfter}'s `only`). */
  calls = 0;
  held = 0;
  /** Counted calls that returned (or failed) from the inner KMS. */
  finished = 0;
  #passFirst = Number.POSITIVE_INFINITY;
  #holds: (dataKeyId: string) => boolean = () => true;
  #openGate: (() => void) | undefined;
  #gate: Promise<void> | undefined;

  constructor(private readonly inner: KMS) {}

  /**
   * From now on, only `n` more calls pass; the others wait for {@link open}. With `only`, just the
   * calls for key IDs it accepts are counted and held.
   */
  holdAfter(n: number, only: (dataKeyId: string) => boolean = () => true): void {
    this.#holds = only;
    this.#passFirst = this.calls + n;
    this.#gate = new Promise((resolve) => {
      this.#openGate = resolve;
    });
  }

  /** Lets held and future calls continue. */
  open(): void {
    this.#passFirst = Number.POSITIVE_INFINITY;
    this.#openGate?.();
    this.#gate = undefined;
  }

  async getDataKey(dataKeyId: string, length: number): Promise<Uint8Array> {
    const counted = this.#holds(dataKeyId);
    if (counted) this.calls++;
    if (counted && this.calls > this.#passFirst && this.#gate) {
      this.held++;
      await this.#gate;
    }
    try {
      return await this.inner.getDataKey(dataKeyId, length);
    } finally {
      if (counted) this.finished++;
    }
  }
}
