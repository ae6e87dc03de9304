/**
 * `confboot metadata-server`: runs the QEMU metadata server that a QEMU or loopback
 * cluster's nodes ask for their own instance, their peers, the control-plane endpoint and the init
 * secret hash. Stops cleanly on SIGTERM/SIGINT (or the caller's AbortSignal).
 */

import { startMetadataServer } from '../../adapters/cloud/qemu/metadata-server.js';
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import type { Logger } from '../../ports/logger.js';
import { splitHostPort } from '../../ports/peer-address.js';
import { type CommandSpec, parseCommand, runCommand, UsageError } from '../program/args.js';
import { untilStopSignal } from '../program/signals.js';

/** The command's options. */
export const METADATA_SERVER_COMMAND: CommandSpec = {
  name: 'metadata-server',
  env: true,
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
      valueName: 'H',
      description: 'bcrypt hash of the init secret served on /initsecrethash',
    },
    listen: {
      type: 'string',
      valueName: 'HOST:PORT',
      default: '0.0.0.0:8080',
      description: 'address to listen on',
    },
  },
  epilog: 'Leases file lines: <expiry> <mac> <ip> <hostname> <client-id>.\nStops on SIGTERM or SIGINT.',
};

/** Splits `HOST:PORT` (IPv6 hosts in brackets). */
export function parseListen(value: string): { host: string; port: number } {
  const address = splitHostPort(value);
  if (!address) throw new UsageError(`--listen: expected HOST:PORT, got ${JSON.stringify(value)}`);
  return address;
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
    const values = parseCommand(argv, METADATA_SERVER_COMMAND);
    if (values === undefined) return 0;
    const { host, port } = parseListen(values.listen as string);
    const logger = options.logger ?? createPinoLogger({ base: { component: 'metadata-server' } });
    const onSignal = (sig: NodeJS.Signals) => logger.info('Shutting down', { signal: sig });
    return untilStopSignal(
      async (stop) => {
        const server = await startMetadataServer({
          leasesFile: values.leases as string,
          initSecretHash: (values['init-secret-hash'] as string | undefined) ?? '',
          ...(values.identities === undefined ? {} : { identitiesFile: values.identities as string }),
          host,
          port,
          logger,
        }).catch((err: unknown) => {
          throw new Error(
            `starting metadata server on ${values.listen as string}: ${(err as Error).message}`,
          );
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
