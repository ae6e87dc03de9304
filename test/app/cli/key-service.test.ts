/**
 * `confboot key-service` in-process: it serves the HKDF vectors over real gRPC on loopback, logs
 * where it listens and never the secret, refuses bad flags and files with exit 2, and stops cleanly
 * when aborted — the SIGTERM/SIGINT handlers of run() only abort that signal.
 */
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { GrpcKmsClient } from '../../../src/adapters/kms/grpc-kms-client.js';
import { createPinoLogger } from '../../../src/adapters/log/pino-logger.js';
import { run, runKeyService } from '../../../src/app/cli/key-service.js';
import { UsageError } from '../../../src/app/program/args.js';
import { readHostPort } from '../../../src/app/program/options.js';

const parseListen = (value: string) => readHostPort('listen', value);

import { loadHkdfVectors } from '../../contract/kms.js';
import { freePort } from '../../support/net.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-key-service-');
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  vi.restoreAllMocks();
});

function secretFiles(secret: Buffer, salt: Buffer): { secretFile: string; saltFile: string } {
  const dir = tmp();
  const secretFile = join(dir, 'mastersecret');
  const saltFile = join(dir, 'salt');
  writeFileSync(secretFile, secret, { mode: 0o600 });
  writeFileSync(saltFile, salt, { mode: 0o600 });
  return { secretFile, saltFile };
}

function captureLogger() {
  const stream = new PassThrough();
  const lines: string[] = [];
  stream.on('data', (c: Buffer) => lines.push(...c.toString('utf8').split('\n').filter(Boolean)));
  return { logger: createPinoLogger({ destination: stream, level: 'debug' }), lines };
}

describe('confboot key-service', () => {
  it('answers every HKDF vector over the wire, logs where it listens and never the secret, and stops on abort', async () => {
    for (const v of loadHkdfVectors()) {
      const secret = Buffer.from(v.secret, 'hex');
      const salt = Buffer.from(v.salt, 'hex');
      const { secretFile, saltFile } = secretFiles(secret, salt);
      const { logger, lines } = captureLogger();
      const stop = new AbortController();
      let listening: (p: number) => void = () => {};
      const bound = new Promise<number>((ok) => (listening = ok));
      const exit = runKeyService(
        ['--master-secret-file', secretFile, '--salt-file', saltFile, '--listen', '127.0.0.1:0'],
        { signal: stop.signal, logger, onListening: ({ port }) => listening(port) },
      );
      const port = await Promise.race([
        bound,
        exit.then((c) => Promise.reject(new Error(`exited early with ${c}`))),
      ]);
      const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${port}`, defaultTimeoutInMs: 10_000 });
      const key = await client.getDataKey(v.info.slice(4), v.length);
      client.close();
      expect(Buffer.from(key).toString('hex')).toBe(v.expected);

      stop.abort();
      expect(await exit).toBe(0);
      const events = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
      expect(events).toContainEqual(
        expect.objectContaining({ msg: 'Key service listening', host: '127.0.0.1', port }),
      );
      expect(events.map((e) => e.msg)).toEqual(
        expect.arrayContaining(['Key service shutting down', 'Key service stopped']),
      );
      const all = lines.join('\n');
      for (const enc of ['hex', 'base64', 'base64url'] as const) {
        expect(all).not.toContain(secret.toString(enc));
        expect(all).not.toContain(salt.toString(enc));
      }
      expect(all).not.toContain(v.expected);
    }
  });

  it('defaults to 0.0.0.0:9000', () => {
    expect(parseListen('0.0.0.0:9000')).toEqual({ host: '0.0.0.0', port: 9000 });
  });

  it.each([
    ['[::1]:9000', { host: '::1', port: 9000 }],
    ['localhost:1', { host: 'localhost', port: 1 }],
  ])('parses --listen %s', (value, want) => {
    expect(parseListen(value)).toEqual(want);
  });

  it.each(['9000', '127.0.0.1', '127.0.0.1:70000', '::1:9000', '127.0.0.1:x'])(
    'refuses --listen %s',
    (value) => {
      expect(() => parseListen(value)).toThrow(UsageError);
    },
  );

  it.each([
    ['a missing master secret file', 'missing', 'ok', /reading master secret file .*mastersecret: ENOENT/],
    ['a 15-byte master secret', 'short', 'ok', /master secret file .* holds 15 bytes; need at least 16/],
    ['a 31-byte salt', 'ok', 'short', /salt file .* holds 31 bytes; need at least 32/],
  ])('exits 2 with a clear message for %s', async (_n, secretKind, saltKind, message) => {
    const dir = tmp();
    const file = (kind: string, name: string, okLen: number) => {
      const p = join(dir, name);
      if (kind === 'ok') writeFileSync(p, Buffer.alloc(okLen, 1));
      if (kind === 'short') writeFileSync(p, Buffer.alloc(okLen - 1, 1));
      return p;
    };
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const code = await run([
      '--master-secret-file',
      file(secretKind, 'mastersecret', 16),
      '--salt-file',
      file(saltKind, 'salt', 32),
      '--listen',
      '127.0.0.1:0',
    ]);
    expect(code).toBe(2);
    expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toMatch(message);
  });

  it('exits 2 when a required flag is missing', async () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    expect(await run(['--salt-file', '/x'])).toBe(2);
    expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toMatch(
      /missing required option --master-secret-file/,
    );
  });

  it('prints help with the default listen address', async () => {
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    expect(await run(['--help'])).toBe(0);
    expect(stdout.mock.calls.map((c) => String(c[0])).join('')).toMatch(
      /--listen HOST:PORT.*default 0\.0\.0\.0:9000/,
    );
  });

  it('run() shuts down cleanly on SIGTERM and removes its signal handlers', async () => {
    const { secretFile, saltFile } = secretFiles(Buffer.alloc(32, 5), Buffer.alloc(32, 6));
    const port = await freePort();
    vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    // Park the worker's own SIGTERM listeners so that emitting the event reaches run()'s handler only.
    const sigintBefore = process.listenerCount('SIGINT');
    const others = process.listeners('SIGTERM');
    for (const l of others) process.removeListener('SIGTERM', l);
    cleanups.push(() => {
      for (const l of others) process.on('SIGTERM', l);
    });
    const exit = run([
      '--master-secret-file',
      secretFile,
      '--salt-file',
      saltFile,
      '--listen',
      `127.0.0.1:${port}`,
    ]);
    // Wait (bounded) until the port accepts connections; a gRPC client would back off for 1 s instead.
    let up = false;
    for (let i = 0; i < 200 && !up; i++) {
      up = await new Promise<boolean>((ok) => {
        const sock = connect(port, '127.0.0.1', () => {
          sock.destroy();
          ok(true);
        }).on('error', () => setTimeout(() => ok(false), 10));
      });
    }
    expect(up).toBe(true);
    const client = new GrpcKmsClient({ endpoint: `127.0.0.1:${port}`, defaultTimeoutInMs: 5_000 });
    cleanups.push(() => client.close());
    expect(await client.getDataKey('measurementSecret', 32)).toHaveLength(32);
    expect(process.listenerCount('SIGTERM')).toBe(1);
    process.emit('SIGTERM');
    expect(await exit).toBe(0);
    expect(process.listenerCount('SIGTERM')).toBe(0);
    expect(process.listenerCount('SIGINT')).toBe(sigintBefore);
  });
});
