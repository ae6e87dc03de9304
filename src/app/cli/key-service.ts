/**
 * `confboot key-service`: the cluster's key service. Reads the master secret and salt from files
 * (upstream: /var/config/mastersecret and /var/config/salt), serves `kms.API` on plain gRPC or, with
 * --tls-cert/--tls-key/--client-ca, on mutual TLS, logs where it listens (never the secret) and
 * stops cleanly on SIGTERM or SIGINT.
 * The body runs until an AbortSignal fires; the process signals only abort it, so tests drive the
 * same code in-process.
 */
import { readFile } from 'node:fs/promises';
import { HkdfKms, MIN_MASTER_SECRET_LENGTH, MIN_SALT_LENGTH } from '../../adapters/kms/hkdf-kms.js';
import { startKeyServiceServer } from '../../adapters/kms/key-service-server.js';
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import { messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import { runCommand, UsageError } from '../program/args.js';
import { defineCommand, hostPort, parseOptions } from '../program/options.js';
import { readPemFlag } from '../program/pem-file.js';
import { untilStopSignal } from '../program/signals.js';

/** Default listen address (upstream `KeyServicePort`, all interfaces). */
export const DEFAULT_KEY_SERVICE_LISTEN = '0.0.0.0:9000';

/** Flags of `confboot key-service`. */
export const keyServiceCommand = defineCommand({
  name: 'key-service',
  env: true,
  kind: 'service',
  summary:
    'Serve data keys derived from the cluster master secret (HKDF-SHA256) over gRPC (kms.API), plain or with mutual TLS.',
  options: {
    'master-secret-file': {
      type: 'string',
      valueName: 'F',
      required: true,
      secret: 'file',
      description: `file with the master secret, used byte for byte (at least ${MIN_MASTER_SECRET_LENGTH} bytes)`,
    },
    'salt-file': {
      type: 'string',
      valueName: 'F',
      required: true,
      secret: 'file',
      description: `file with the master salt, used byte for byte (at least ${MIN_SALT_LENGTH} bytes)`,
    },
    listen: {
      type: 'string',
      valueName: 'HOST:PORT',
      default: DEFAULT_KEY_SERVICE_LISTEN,
      description: 'address to listen on; [v6addr]:PORT for IPv6, port 0 picks a free port',
      parse: hostPort,
    },
    'tls-cert': {
      type: 'string',
      valueName: 'F',
      description: 'PEM certificate chain of the service; with --tls-key and --client-ca: mutual TLS',
    },
    'tls-key': {
      type: 'string',
      valueName: 'F',
      secret: 'file',
      description: 'PEM private key of --tls-cert',
    },
    'client-ca': {
      type: 'string',
      valueName: 'F',
      description: 'PEM CA certificates; only clients with a certificate issued under them are served',
    },
  },
  epilog:
    'WARNING: without --tls-cert/--tls-key/--client-ca the port speaks plain gRPC with no authentication\n' +
    "(as upstream). Anyone who can connect to it can fetch any data key: the cluster's measurement secret\n" +
    "and the key of every node's state disk. Bind it to loopback, or keep it behind a NetworkPolicy that\n" +
    'admits only the join service (deploy/), or use mutual TLS (`confboot manifests --tls-secrets`).',
  exitCodes: {
    0: 'after a clean shutdown (SIGTERM/SIGINT)',
    1: 'a runtime failure',
    2: 'bad flags or files',
  },
});

/** Reads the mutual-TLS files: all three flags or none. */
async function readTlsFlags(values: {
  'tls-cert': string | undefined;
  'tls-key': string | undefined;
  'client-ca': string | undefined;
}): Promise<{ certChain: Buffer; privateKey: Buffer; clientCa: Buffer } | undefined> {
  const { 'tls-cert': cert, 'tls-key': key, 'client-ca': clientCa } = values;
  if (cert === undefined && key === undefined && clientCa === undefined) return undefined;
  if (cert === undefined || key === undefined || clientCa === undefined) {
    const missing = Object.entries(values).filter(([, v]) => v === undefined);
    throw new UsageError(
      `mutual TLS needs all of --tls-cert, --tls-key, --client-ca; missing --${missing.map(([f]) => f).join(', --')}`,
    );
  }
  return {
    certChain: await readPemFlag('tls-cert', cert),
    privateKey: await readPemFlag('tls-key', key),
    clientCa: await readPemFlag('client-ca', clientCa),
  };
}

/** Whether `host` is a loopback address, where plain gRPC reaches only this machine. */
function isLoopback(host: string): boolean {
  return host === 'localhost' || host === '::1' || /^127\./.test(host);
}

async function readSecretFile(what: string, path: string, minLength: number): Promise<Buffer> {
  let data: Buffer;
  try {
    data = await readFile(path);
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? messageOf(err);
    throw new UsageError(`reading ${what} file ${path}: ${reason}`);
  }
  if (data.length < minLength)
    throw new UsageError(`${what} file ${path} holds ${data.length} bytes; need at least ${minLength}`);
  return data;
}

/** Options of {@link runKeyService}. */
export interface KeyServiceRunOptions {
  /** Stops the service when it aborts. */
  signal: AbortSignal;
  /** Default: pino JSON lines on stderr. */
  logger?: Logger;
  /** Called once the service is bound, with the actual port. */
  onListening?: (address: { host: string; port: number }) => void;
}

/**
 * Runs the key service until `options.signal` aborts; resolves to the exit code. Usage and file
 * errors throw {@link UsageError} (exit 2 through {@link run}).
 */
export async function runKeyService(argv: string[], options: KeyServiceRunOptions): Promise<number> {
  const values = parseOptions(argv, keyServiceCommand);
  if (values === undefined) return 0;
  const { host, port } = values.listen;
  const tls = await readTlsFlags(values);
  const masterSecret = await readSecretFile(
    'master secret',
    values['master-secret-file'],
    MIN_MASTER_SECRET_LENGTH,
  );
  const salt = await readSecretFile('salt', values['salt-file'], MIN_SALT_LENGTH);
  const kms = new HkdfKms(masterSecret, salt);
  masterSecret.fill(0);
  salt.fill(0);

  const logger = options.logger ?? createPinoLogger({ base: { component: 'key-service' } });
  const server = await startKeyServiceServer({ kms, host, port, logger, ...(tls ? { tls } : {}) });
  logger.info('Key service listening', { host, port: server.port, mutualTls: tls !== undefined });
  if (!tls && !isLoopback(host))
    logger.warn(
      'Key service serves plain gRPC without authentication: anyone who reaches this port can fetch the measurement secret and every disk key',
      { host, port: server.port },
    );
  options.onListening?.({ host, port: server.port });

  await new Promise<void>((resolve) => {
    if (options.signal.aborted) resolve();
    else options.signal.addEventListener('abort', () => resolve(), { once: true });
  });
  logger.info('Key service shutting down');
  await server.shutdown();
  logger.info('Key service stopped');
  return 0;
}

/** `confboot key-service …`: runs until SIGTERM or SIGINT; resolves to the exit code. */
export function run(argv: string[]): Promise<number> {
  return untilStopSignal((signal) => runCommand(() => runKeyService(argv, { signal })));
}

/** The command's option table. */
export const commandSpecs = [keyServiceCommand];
