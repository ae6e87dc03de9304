import type { AdmissionSettings } from '../../adapters/grpc/atls/admission-settings.js';
import type { AttestedGrpcServer } from '../../adapters/grpc/attested-server.js';
import { createJoinServer } from '../../adapters/grpc/join-server.js';
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
import { InMemoryDiskBindings } from '../../adapters/memory/in-memory-disk-bindings.js';
import {
  HealthServiceDefinition,
  HealthStatus,
  ServingStatus,
  startGrpcHealthServer,
} from '../../adapters/ops/grpc-health.js';
import {
  type OperationsHttpServer,
  type ReadinessChecks,
  startOperationsHttpServer,
} from '../../adapters/ops/http-server.js';
import { ConcurrencyLimiter, TokenBucketRateLimiter } from '../../adapters/ops/limits.js';
import { JoinServiceMetrics, type JoinServiceMetricsOptions } from '../../adapters/ops/metrics.js';
import { TimedValidator } from '../../adapters/ops/timed-validator.js';
import type { JsonWebKeySet } from '../../adapters/receipts/receipt-key.js';
import { CryptoRandom } from '../../adapters/system/crypto-random.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { TicketIssuer } from '../../domain/ticket-issuer.js';
import type { BootstrapTokens } from '../../ports/bootstrap-tokens.js';
import type { CertificateAuthority } from '../../ports/certificate-authority.js';
import type { Clock } from '../../ports/clock.js';
import type { ClusterFacts } from '../../ports/cluster-facts.js';
import type { DenyList } from '../../ports/deny-list.js';
import type { DiskBindings } from '../../ports/disk-bindings.js';
import type { EventRecorder } from '../../ports/event-recorder.js';
import type { EvidenceStore } from '../../ports/evidence-store.js';
import type { KMS } from '../../ports/kms.js';
import type { Logger } from '../../ports/logger.js';
import type { PeerIdentity } from '../../ports/peer-identity.js';
import type { ReceiptSigner } from '../../ports/receipt-signer.js';
import type { Validator } from '../../ports/validator.js';
import { VERSION } from '../../version.js';
import { JOIN_SERVICE_HTTP_PORT, JOIN_SERVICE_MEMORY_BUDGET_MIB, JOIN_SERVICE_PORT } from '../defaults.js';
import { variantOfOid } from '../registry/index.js';
import { joinAuditSink } from './audit-sink.js';
import { loadDenyList } from './deny-list.js';
import { GuardedJoinCall } from './guarded-join-call.js';
import { Cleanups, readinessOf, type ServiceState, shutdownOf } from './lifecycle.js';
import { ByteBudget, deriveMemoryBounds, type MemoryBounds } from './memory.js';
import { observeAttestedTls, recordRefusedEvidence } from './tls-refusals.js';

/** Default requests per second per caller IP. */
export const DEFAULT_RATE_LIMIT_PER_SECOND = 10;
/** Default cap on requests handled at once. */
export const DEFAULT_MAX_CONCURRENT = 64;
/** Default bound on draining running requests at shutdown. */
export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;
/** The gRPC service name the health service reports for the join API. */
export const JOIN_HEALTH_SERVICE = 'join.API';

/** A host and port to listen on (port 0 = any free port). */
export interface ListenAddress {
  host: string;
  port: number;
}

/**
 * Admission limits and timeouts: the service's own (rate, concurrency, memory, shutdown) and the
 * attested TLS listener's admission settings under their one name (atls/admission.ts); the listener's
 * defaults apply to what is not set. The caps on attested connections and on connections in their
 * handshake are derived from the memory budget.
 */
export interface JoinServiceLimits extends Omit<AdmissionSettings, 'maxConnections' | 'maxHandshakes'> {
  /** Requests per second per caller IP; 0 disables the rate limit. Default {@link DEFAULT_RATE_LIMIT_PER_SECOND}. */
  ratePerSecond?: number;
  /** Burst per caller IP; default max(1, ceil(ratePerSecond)). */
  burst?: number;
  /** Requests handled at once; 0 disables the cap. Default {@link DEFAULT_MAX_CONCURRENT}. */
  maxConcurrent?: number;
  /** How long shutdown lets running requests finish; default {@link DEFAULT_SHUTDOWN_GRACE_MS}. */
  shutdownGraceMs?: number;
  /** Largest attestation document accepted (adapter default 1 MiB). */
  maxDocumentBytes?: number;
  /**
   * Memory budget in MiB; request, connection, TLS handshake and message bounds are derived from it (memory.ts).
   * Default {@link JOIN_SERVICE_MEMORY_BUDGET_MIB}.
   */
  memoryBudgetMib?: number;
}

/** Everything {@link startJoinService} needs. */
export interface JoinServiceOptions {
  /** Validators of joining nodes (usually one UpdatableValidator). At least one. */
  validators: readonly Validator[];
  /** The key service (GrpcKmsClient in production). */
  kms: Pick<KMS, 'getDataKey'>;
  ca: CertificateAuthority;
  tokens: BootstrapTokens;
  facts: ClusterFacts;
  /** The cluster's measurement salt. */
  measurementSalt: Uint8Array;
  /** `<ip>:6443` put into join tickets. */
  apiServerEndpoint: string;
  /**
   * Which cluster instance is behind a caller's address (production: MetadataPeerIdentity over the
   * cloud's MetadataAPI). With it, a node gets a kubelet certificate only for its own name,
   * addresses and role; without it, only for its own source address (docs/identity.md).
   */
  identity?: PeerIdentity;
  /**
   * Which node each state disk belongs to (production: DiskBinding resources in the Kubernetes
   * API, shared by every replica). Default: kept in this process's memory only (lost on restart).
   */
  diskBindings?: DiskBindings;
  /** Default the system clock. Used for certificate validity, token TTLs and the rate limit. */
  clock?: Clock;
  /** Default pino JSON on stderr. */
  logger?: Logger;
  /**
   * The receipt key (ReceiptKey.load): every issued ticket carries a receipt it signs, and the
   * operations HTTP port serves its JWKS at /.well-known/jwks.json. Without it tickets carry none.
   */
  receiptKey?: ReceiptSigner & { jwks(): JsonWebKeySet };
  /**
   * Keeps the evidence behind every decision (issued and refused tickets, documents refused during
   * the handshake) for dry runs of new attestation configs. Without it nothing is recorded.
   */
  evidence?: EvidenceStore;
  /**
   * Reports every refusal for operators (production: Kubernetes Events, `--refusal-events`), from
   * the same decision as its audit event. Without it refusals are in the audit log only.
   */
  events?: EventRecorder;
  /** Deny-list file, watched for changes. Without it nothing is denied. */
  denyListPath?: string;
  /** Attested gRPC; default 0.0.0.0:30090. */
  listen?: ListenAddress;
  /** Operations HTTP (/healthz, /readyz, /metrics); default 0.0.0.0:30091. */
  httpListen?: ListenAddress;
  /**
   * Optional plain-gRPC port serving only grpc.health.v1.Health, for probes that cannot attest
   * (the attested port accepts attested connections only). Off by default.
   */
  grpcHealthListen?: ListenAddress;
  limits?: JoinServiceLimits;
  /** A metrics object to use (e.g. one that already counts config reloads), or options for a new one. */
  metrics?: JoinServiceMetrics | JoinServiceMetricsOptions;
  /** Aborting it shuts the service down gracefully (SIGTERM in the CLI). */
  signal?: AbortSignal;
  /** Extra readiness checks (name → check), e.g. the attestation config watcher. */
  readinessChecks?: Record<string, () => boolean>;
  /**
   * Disposers of resources the caller hands over (KMS client, validator watcher): run in order after
   * the gRPC servers stopped, on close and when starting fails.
   */
  onClose?: Array<() => void | Promise<void>>;
}

/** A running join service. */
export interface RunningJoinService {
  /** Bound attested gRPC port. */
  readonly grpcPort: number;
  /** Bound operations HTTP port. */
  readonly httpPort: number;
  /** Bound plain-gRPC health port, when configured. */
  readonly grpcHealthPort: number | undefined;
  readonly metrics: JoinServiceMetrics;
  readonly health: HealthStatus;
  readonly denyList: DenyList;
  /** The current readiness checks. */
  readiness(): ReadinessChecks;
  /**
   * Graceful shutdown: readiness and health go NOT_SERVING, the listener stops accepting, running
   * requests drain within the grace period, watchers and servers close. Idempotent.
   */
  close(): Promise<void>;
  /** Settles once {@link close} finished (however it was triggered). */
  readonly closed: Promise<void>;
}

function hostPort({ host, port }: ListenAddress): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** What the steps of {@link startJoinService} share. */
interface Start {
  options: JoinServiceOptions;
  limits: JoinServiceLimits;
  clock: Clock;
  logger: Logger;
  metrics: JoinServiceMetrics;
  memory: MemoryBounds;
  cleanups: Cleanups;
}

/**
 * Starts the join service: loads the deny list (fails closed on a missing or invalid file),
 * listens for attested gRPC and operations HTTP, and reports SERVING. Resolves once listening.
 * @throws when a dependency is invalid (empty salt or endpoint), the deny list cannot be loaded,
 *   or a port cannot be bound; whatever was started is stopped again
 */
export async function startJoinService(options: JoinServiceOptions): Promise<RunningJoinService> {
  if (options.validators.length === 0) throw new Error('starting join service: no attestation validator');
  const logger = options.logger ?? createPinoLogger({ base: { component: 'join-service' } });
  const limits = options.limits ?? {};
  const start: Start = {
    options,
    limits,
    clock: options.clock ?? new SystemClock(),
    logger,
    // Throws before anything starts when the budget is too small.
    memory: deriveMemoryBounds(
      limits.memoryBudgetMib ?? JOIN_SERVICE_MEMORY_BUDGET_MIB,
      limits.maxConcurrent ?? DEFAULT_MAX_CONCURRENT,
    ),
    metrics:
      options.metrics instanceof JoinServiceMetrics
        ? options.metrics
        : new JoinServiceMetrics(options.metrics),
    cleanups: new Cleanups(logger),
  };
  // Run after the servers stopped and the deny list closed, in the given order (see close()).
  for (const c of [...(options.onClose ?? [])].reverse()) start.cleanups.push(c);
  try {
    const denyList = await loadDenyList({ ...start, denyListPath: options.denyListPath });
    const server = joinServer(start, denyList);
    return await serve(start, server, denyList);
  } catch (err) {
    await start.cleanups.run();
    throw err;
  }
}

/** The ticket issuer behind the guard, served by the attested gRPC join server (not listening yet). */
function joinServer(start: Start, denyList: DenyList): AttestedGrpcServer {
  const { options, limits, clock, logger, metrics, memory } = start;
  // The issuer checks its own inputs (empty salt or endpoint) before anything listens.
  const { kms, ca, tokens, facts, measurementSalt, apiServerEndpoint, identity } = options;
  const issuer = new TicketIssuer({
    kms,
    ca,
    tokens,
    facts,
    measurementSalt,
    apiServerEndpoint,
    clock,
    random: new CryptoRandom(),
    logger,
    diskBindings: options.diskBindings ?? new InMemoryDiskBindings(),
    ...(identity ? { identity } : {}),
    denyList,
  });
  const slots = new ConcurrencyLimiter(memory.maxConcurrent);
  // Every decision's audit event, Event and evidence are written through this one sink.
  const audit = joinAuditSink({ logger, clock, events: options.events, evidence: options.evidence });
  const joinCall = new GuardedJoinCall({
    inner: issuer,
    rateLimit: new TokenBucketRateLimiter({
      ratePerSecond: limits.ratePerSecond ?? DEFAULT_RATE_LIMIT_PER_SECOND,
      ...(limits.burst !== undefined ? { burst: limits.burst } : {}),
      clock,
    }),
    slots,
    requestBytes: new ByteBudget(memory.requestBytesInFlight),
    metrics,
    audit,
    ...(options.receiptKey !== undefined
      ? { receipts: { signer: options.receiptKey, clock, build: `confboot ${VERSION} join-service` } }
      : {}),
  });
  const {
    ratePerSecond: _r,
    burst: _b,
    maxConcurrent: _c,
    shutdownGraceMs: _g,
    memoryBudgetMib: _m,
    ...rest
  } = limits;
  const { maxDocumentBytes, ...admission } = rest;
  const server = createJoinServer({
    validators: options.validators.map(
      (v) =>
        new TimedValidator(v, ({ variant, ok, seconds }) =>
          metrics.validationSeconds.observe({ variant, outcome: ok ? 'ok' : 'refused' }, seconds),
        ),
    ),
    clock,
    joinCall,
    logger,
    variantOfOid,
    ...(maxDocumentBytes !== undefined ? { maxDocumentBytes } : {}),
    ...admission,
    // A joining node makes one call per connection: a connection beyond the requests that can run
    // or wait would be verified only to be refused, so it waits for room before verification.
    maxConnections:
      slots.max === 0 ? memory.maxConnections : Math.min(memory.maxConnections, slots.max + slots.maxQueue),
    maxHandshakes: memory.maxHandshakes,
    ...(options.evidence !== undefined
      ? { onEvidenceRefused: recordRefusedEvidence(audit, options.validators) }
      : {}),
    maxMessageBytes: memory.maxMessageBytes,
    maxStreamsPerConnection: memory.maxStreamsPerConnection,
    maxSessionMemoryMib: memory.maxSessionMemoryMib,
  });
  observeAttestedTls(server, metrics, audit);
  return server;
}

/** Listens on every port, reports SERVING, and returns the running service with its shutdown. */
async function serve(
  start: Start,
  server: AttestedGrpcServer,
  denyList: DenyList,
): Promise<RunningJoinService> {
  const { options, limits, logger, metrics, memory, cleanups } = start;
  const health = new HealthStatus({
    '': ServingStatus.NOT_SERVING,
    [JOIN_HEALTH_SERVICE]: ServingStatus.NOT_SERVING,
  });
  const state: ServiceState = { grpcListening: false, shuttingDown: false };
  server.grpc.addService(HealthServiceDefinition, health.implementation());
  const listen = options.listen ?? { host: '0.0.0.0', port: JOIN_SERVICE_PORT };
  const grpcPort = await server.listen(listen.host, listen.port);
  state.grpcListening = true;
  const graceMs = limits.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
  const stopGrpc = async () => {
    state.grpcListening = false;
    await server.shutdown(graceMs);
  };
  cleanups.push(stopGrpc);

  let grpcHealthPort: number | undefined;
  if (options.grpcHealthListen !== undefined) {
    const h = await startGrpcHealthServer(hostPort(options.grpcHealthListen), health);
    grpcHealthPort = h.port;
    // Stopped after the drain, so plain health probes see NOT_SERVING rather than a closed port.
    cleanups.insertBefore(stopGrpc, () => h.server.forceShutdown());
  }

  const readiness = readinessOf(
    {
      validator: options.validators.length > 0,
      // The ticket issuer refused to be built without salt and endpoint; the rest are objects.
      dependencies: Boolean(options.kms && options.ca && options.tokens && options.facts),
    },
    options.readinessChecks ?? {},
    state,
  );
  const httpListen = options.httpListen ?? { host: '0.0.0.0', port: JOIN_SERVICE_HTTP_PORT };
  const receiptKey = options.receiptKey;
  const http: OperationsHttpServer = await startOperationsHttpServer({
    host: httpListen.host,
    port: httpListen.port,
    metrics,
    readiness,
    logger,
    ...(receiptKey !== undefined ? { jwks: () => receiptKey.jwks() } : {}),
  });
  // Closed last, so probes see "not ready" while requests drain.
  cleanups.unshift(() => http.close());

  health.set('', ServingStatus.SERVING);
  health.set(JOIN_HEALTH_SERVICE, ServingStatus.SERVING);
  logger.info('Join service listening', {
    grpc: hostPort({ host: listen.host, port: grpcPort }),
    http: hostPort({ host: httpListen.host, port: http.port }),
    ...(grpcHealthPort !== undefined && options.grpcHealthListen !== undefined
      ? { grpcHealth: hostPort({ host: options.grpcHealthListen.host, port: grpcHealthPort }) }
      : {}),
    variants: options.validators.map((v) => v.variant),
    memory,
    denyList: options.denyListPath ?? null,
    receiptKeyId: receiptKey?.keyId ?? null,
  });
  const { close, closed } = shutdownOf({ ...start, signal: options.signal }, health, state, graceMs);
  return {
    grpcPort,
    httpPort: http.port,
    grpcHealthPort,
    metrics,
    health,
    denyList,
    readiness,
    close,
    closed,
  };
}
