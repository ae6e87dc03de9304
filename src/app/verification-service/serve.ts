/**
 * The node's verification service (app layer, wiring): the domain {@link VerificationService} over
 * the node's own Issuer, served by the HTTP edge. The bootstrapper starts it once the node is
 * bootstrapped (initialised, joined, or bootstrapped in an earlier boot) and stops it with itself
 * (src/app/bootstrapper/node.ts, option `verification`); before that the init server's attested TLS
 * is where the node attests. It holds no secret: only the issuer, which quotes.
 */
import {
  startVerificationHttpServer,
  type VerificationHttpServer,
} from '../../adapters/http/verification-server.js';
import type { BootstrapResult } from '../../domain/bootstrapper.js';
import { VerificationService, type VerificationServiceOptions } from '../../domain/verification-service.js';
import type { Clock } from '../../ports/clock.js';
import { messageOf, wrapError } from '../../ports/errors.js';
import type { Issuer } from '../../ports/issuer.js';
import type { Logger } from '../../ports/logger.js';

/** Upstream's HTTP port of the verification service (in-cluster; its NodePort is 30080). */
export const VERIFICATION_SERVICE_PORT = 8080;

/** What the service uses: the node's issuer, time and a logger. */
export interface VerificationServiceDeps {
  issuer: Pick<Issuer, 'variant' | 'oid' | 'issue'>;
  clock: Pick<Clock, 'sleep'>;
  logger: Logger;
}

/** Where the service listens and how it bounds callers; every bound has a default. */
export interface VerificationServiceSettings extends VerificationServiceOptions {
  /** Where to listen; port 0 picks a free one. */
  listen: { host: string; port: number };
  /** Connections at once. */
  maxConnections?: number;
  /** Connections at once from one source. */
  maxConnectionsPerSource?: number;
  /** Bound on receiving a request head, in ms. */
  headersTimeoutMs?: number;
}

/** Starts the verification service now; rejects when it cannot listen. */
export async function startVerificationService(
  deps: VerificationServiceDeps,
  settings: VerificationServiceSettings,
): Promise<VerificationHttpServer> {
  const { listen, maxConnections, maxConnectionsPerSource, headersTimeoutMs, ...bounds } = settings;
  const attester = new VerificationService(deps.issuer, deps.clock, bounds);
  try {
    const server = await startVerificationHttpServer({
      host: listen.host,
      port: listen.port,
      attester,
      logger: deps.logger,
      ...(maxConnections === undefined ? {} : { maxConnections }),
      ...(maxConnectionsPerSource === undefined ? {} : { maxConnectionsPerSource }),
      ...(headersTimeoutMs === undefined ? {} : { headersTimeoutMs }),
    });
    deps.logger.info('Verification service listening', { host: listen.host, port: server.port });
    return server;
  } catch (err) {
    throw wrapError(`starting the verification service on ${listen.host}:${listen.port}`, err);
  }
}

/** The verification service of a bootstrapper, started once the node is bootstrapped. */
export interface PendingVerificationService {
  /**
   * The port once listening; undefined when it never starts (bootstrapping stopped or failed, or
   * {@link stop} came first). Never rejects: a failure to listen is logged.
   */
  listening: Promise<number | undefined>;
  /** Stops it (or keeps it from starting); resolves once closed. */
  stop(): Promise<void>;
}

/** Starts the service when `done` resolves with a bootstrapped node; see {@link PendingVerificationService}. */
export function serveWhenBootstrapped(
  done: Promise<BootstrapResult>,
  deps: VerificationServiceDeps,
  settings: VerificationServiceSettings,
): PendingVerificationService {
  let stopped = false;
  let server: VerificationHttpServer | undefined;
  const bootstrapped = done.then(
    (result) => result.outcome !== 'stopped',
    // A failed bootstrap is reported through `done`; the service then never starts.
    () => false,
  );
  const listening = bootstrapped.then(async (go) => {
    if (!go || stopped) return undefined;
    try {
      const started = await startVerificationService(deps, settings);
      if (stopped) {
        await started.close();
        return undefined;
      }
      server = started;
      return started.port;
    } catch (err) {
      deps.logger.error('Verification service not started', { error: messageOf(err) });
      return undefined;
    }
  });
  return {
    listening,
    stop: async () => {
      stopped = true;
      await server?.close();
      server = undefined;
    },
  };
}
