/**
 * `confboot join-service`: the join service on a control plane (upstream's process, with confboot's
 * operations additions). Parses the flags the Kubernetes manifest passes
 * (deploy/kubernetes/<cloud>/<variant>.yaml; join-service-spec.ts, join-service-flags.ts), wires the
 * production adapters (src/app/join-service/production.ts) and runs until SIGTERM or SIGINT, then
 * drains and exits 0. The body runs until an AbortSignal fires; the process signals only abort it,
 * so tests drive the same code in-process.
 */

import type { GrpcKmsClientTls } from '../../adapters/kms/grpc-kms-client.js';
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import { ReceiptKey } from '../../adapters/receipts/receipt-key.js';
import type { Logger } from '../../ports/logger.js';
import { startProductionJoinService } from '../join-service/production.js';
import { runCommand } from '../program/args.js';
import { untilStopSignal } from '../program/signals.js';
import { type JoinServiceFlags, parseJoinServiceFlags } from './join-service-flags.js';
import { readPemFlag } from './pem-file.js';

export {
  type JoinServiceFlags,
  parseHostPort,
  parseJoinServiceFlags,
  parseRateLimit,
} from './join-service-flags.js';
export {
  DEFAULT_JOIN_SERVICE_HTTP_LISTEN,
  DEFAULT_JOIN_SERVICE_LISTEN,
  joinServiceCommand,
} from './join-service-spec.js';

/** Reads the `--key-service-*` files; a file that cannot be read or holds no PEM is a usage error. */
async function readKeyServiceTls(
  paths: JoinServiceFlags['keyServiceTlsPaths'],
): Promise<GrpcKmsClientTls | undefined> {
  if (paths === undefined) return undefined;
  return {
    ca: await readPemFlag('key-service-ca', paths.ca),
    certChain: await readPemFlag('key-service-cert', paths.cert),
    privateKey: await readPemFlag('key-service-key', paths.key),
  };
}

/** Options of {@link runJoinService}. */
export interface JoinServiceRunOptions {
  /** Stops the service when it aborts. */
  signal: AbortSignal;
  /** Default: pino JSON lines on stderr at `--log-level`. */
  logger?: Logger;
  /** Called as soon as the ports listen (readiness follows once the Kubernetes client is loaded). */
  onListening?: (ports: { grpcPort: number; httpPort: number; grpcHealthPort: number | undefined }) => void;
}

/**
 * Runs the join service until `options.signal` aborts, drains, and resolves to the exit code.
 * Flag errors throw {@link UsageError} (exit 2 through {@link run}); start failures reject (exit 1).
 */
export async function runJoinService(argv: string[], options: JoinServiceRunOptions): Promise<number> {
  const flags = parseJoinServiceFlags(argv);
  if (flags === undefined) return 0;
  const logger =
    options.logger ?? createPinoLogger({ level: flags.logLevel, base: { component: 'join-service' } });
  // Paths, addresses and limits only: the flags hold no secret values.
  logger.debug('Configuration', { ...flags });
  const {
    keyServiceTlsPaths,
    receiptKeyPath,
    receiptRetiredJwksPath,
    stateDir,
    evidenceMaxRecords,
    evidenceMaxAgeMs,
    tdxCollateralDir: _dir,
    ratePerSecond,
    maxConcurrent,
    memoryBudgetMib,
    shutdownGraceMs,
    admission,
    logLevel: _level,
    ...config
  } = flags;
  const service = await startProductionJoinService({
    ...definedOnly(config),
    ...definedOnly({
      keyServiceTls: await readKeyServiceTls(keyServiceTlsPaths),
      receiptKey:
        receiptKeyPath === undefined
          ? undefined
          : await ReceiptKey.load(receiptKeyPath, definedOnly({ retiredJwksPath: receiptRetiredJwksPath })),
      stateDir,
      evidenceRetention:
        config.evidenceStore === undefined
          ? undefined
          : { maxRecords: evidenceMaxRecords, maxAgeMs: evidenceMaxAgeMs },
    }),
    logger,
    signal: options.signal,
    limits: { ratePerSecond, maxConcurrent, memoryBudgetMib, shutdownGraceMs, ...admission },
    onListening: (s) =>
      options.onListening?.({ grpcPort: s.grpcPort, httpPort: s.httpPort, grpcHealthPort: s.grpcHealthPort }),
  });
  await service.closed;
  return 0;
}

/** `confboot join-service …`: runs until SIGTERM or SIGINT; resolves to the exit code. */
export function run(argv: string[]): Promise<number> {
  return untilStopSignal((signal) => runCommand(() => runJoinService(argv, { signal })));
}

/** `T` with its properties that may be undefined made optional instead. */
type DefinedOnly<T> = { [K in keyof T as undefined extends T[K] ? never : K]: T[K] } & {
  [K in keyof T as undefined extends T[K] ? K : never]?: Exclude<T[K], undefined>;
};

/** `o` without its undefined properties, so optional options stay unset. */
function definedOnly<T extends object>(o: T): DefinedOnly<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as DefinedOnly<T>;
}
