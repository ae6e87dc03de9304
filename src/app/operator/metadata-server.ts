/**
 * `confboot metadata-server`: runs the QEMU metadata server that a QEMU or loopback
 * cluster's nodes ask for their own instance, their peers, the control-plane endpoint and the init
 * secret hash. Stops cleanly on SIGTERM/SIGINT (or the caller's AbortSignal).
 */

import { startMetadataServer } from '../../adapters/cloud/qemu/metadata-server.js';
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import type { Logger } from '../../ports/logger.js';
import { canonicalIp, splitHostPort } from '../../ports/peer-address.js';
import { runCommand, UsageError } from '../program/args.js';
import { defineCommand, parseOptions } from '../program/options.js';
import { untilStopSignal } from '../program/signals.js';

/** The command's options. */
export const METADATA_SERVER_COMMAND = defineCommand({
  name: 'metadata-server',
  env: true,
  kind: 'service',
  summary:
    'Serve /self, /peers, /endpoint, /initsecrethash (and /self/identity with --identities) for QEMU clusters from a dnsmasq leases file.',
  options: {
    leases: {
      type: 'string',
      valueName: 'F',
      required: true,
      description: 'dnsmasq leases file, re-read per request',
    },
    identities: {
      type: 'string',
      valueName: 'F',
      description: 'JSON file of per-hostname identities served on /self/identity, re-read per request',
    },
    'init-secret-hash': {
      type: 'string',
      valueName: 'HASH',
      description: 'bcrypt hash of the init secret served on /initsecrethash',
    },
    'load-balancer': {
      type: 'string',
      valueName: 'IP',
      description: "the cluster's load balancer, answered on /endpoint (default: control-plane-0's address)",
      parse: (raw: string) => loadBalancerIp(raw),
    },
    listen: {
      type: 'string',
      valueName: 'HOST:PORT',
      default: '0.0.0.0:8080',
      description: 'address to listen on',
      parse: (raw: string) => parseListen(raw),
    },
  },
  epilog: 'Leases file lines: <expiry> <mac> <ip> <hostname> <client-id>.\nStops on SIGTERM or SIGINT.',
  exitCodes: { 0: 'after a clean shutdown (SIGTERM/SIGINT)', 1: 'starting or serving failed' },
});

/** Splits `HOST:PORT` (IPv6 hosts in brackets). */
export function parseListen(value: string): { host: string; port: number } {
  const address = splitHostPort(value);
  if (!address) throw new UsageError(`--listen: expected HOST:PORT, got ${JSON.stringify(value)}`);
  return address;
}

/** The `--load-balancer` address: an IP literal. */
export function loadBalancerIp(value: string): string {
  if (canonicalIp(value) === undefined)
    throw new UsageError(`--load-balancer: expected an IP address, got ${JSON.stringify(value)}`);
  return value;
}

/** Options for running the command in-process (tests, embedding). */
export interface MetadataServerRunOptions {
  /** Stops the server when aborted, in addition to SIGTERM/SIGINT. */
  signal?: AbortSignal;
  logger?: Logger;
  /** Called once the server listens, with its port. */
  onListening?: (port: number) => void;
}

/** Runs `confboot metadata-server`; resolves to the exit code after shutdown. */
export function run(argv: string[], options: MetadataServerRunOptions = {}): Promise<number> {
  return runCommand(async () => {
    const values = parseOptions(argv, METADATA_SERVER_COMMAND);
    if (values === undefined) return 0;
    const { host, port } = values.listen;
    const logger = options.logger ?? createPinoLogger({ base: { component: 'metadata-server' } });
    const onSignal = (sig: NodeJS.Signals) => logger.info('Shutting down', { signal: sig });
    return untilStopSignal(
      async (stop) => {
        const server = await startMetadataServer({
          leasesFile: values.leases,
          initSecretHash: values['init-secret-hash'] ?? '',
          ...(values.identities === undefined ? {} : { identitiesFile: values.identities }),
          ...(values['load-balancer'] === undefined ? {} : { loadBalancerIp: values['load-balancer'] }),
          host,
          port,
          logger,
        }).catch((err: unknown) => {
          throw new Error(`starting metadata server on ${host}:${port}: ${(err as Error).message}`);
        });
        options.onListening?.(server.port);
        if (!stop.aborted)
          await new Promise<void>((resolve) =>
            stop.addEventListener('abort', () => resolve(), { once: true }),
          );
        await server.close();
        logger.info('Metadata server stopped');
        return 0;
      },
      { onSignal, signal: options.signal },
    );
  });
}

/** The command's option table. */
export const commandSpecs = [METADATA_SERVER_COMMAND];
