/**
 * Join service composition (application layer): the domain's TicketIssuer behind the attested gRPC
 * join server (src/adapters/grpc), wrapped in the operational parts — admission limits, the deny
 * list, audit events, metrics, the gRPC health service, the operations HTTP server and graceful
 * shutdown. Every dependency is injected, so the CLI (production adapters), the demo and the
 * benchmarks (simulated Kubernetes, in-process) build the same service.
 */
import { FileDenyList } from '../../adapters/fs/file-deny-list.js';
import type { AtlsDeadlines } from '../../adapters/grpc/atls/admission.js';
import type { RefusedEvidence } from '../../adapters/grpc/atls/exchange.js';
import { createJoinServer } from '../../adapters/grpc/join-server.js';
import { createPinoLogger } from '../../adapters/log/pino-logger.js';
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
import { InMemoryDiskBindings } from '../../adapters/simulated/in-memory-disk-bindings.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { TicketIssuer } from '../../domain/ticket-issuer.js';
import type { BootstrapTokens } from '../../ports/bootstrap-tokens.js';
import type { CertificateAuthority } from '../../ports/certificate-authority.js';
import type { Clock } from '../../ports/clock.js';
import type { ClusterFacts } from '../../ports/cluster-facts.js';
import { type DenyList, EMPTY_DENY_LIST } from '../../ports/deny-list.js';
import type { DiskBindings } from '../../ports/disk-bindings.js';
import { isAttestationError, isConfbootError, messageOf } from '../../ports/errors.js';
import type { EvidenceStore } from '../../ports/evidence-store.js';
import type { KMS } from '../../ports/kms.js';
import type { Logger } from '../../ports/logger.js';
import type { PeerIdentity } from '../../ports/peer-identity.js';
import type { ReceiptSigner } from '../../ports/receipt-signer.js';
import type { Validator } from '../../ports/validator.js';
import { VERSION } from '../../version.js';
import { JOIN_SERVICE_HTTP_PORT, JOIN_SERVICE_MEMORY_BUDGET_MIB, JOIN_SERVICE_PORT } from '../defaults.js';
import { AUDIT_EVENT, auditMismatches, emitAudit, GuardedJoinHandler } from './guarded-handler.js';
import { ByteBudget, deriveMemoryBounds } from './memory.js';

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

/** Admission limits and timeouts. */
export interface JoinServiceLimits {
  /** Requests per second per caller IP; 0 disables the rate limit. Default {@link DEFAULT_RATE_LIMIT_PER_SECOND}. */
  ratePerSecond?: number;
  /** Burst per caller IP; default max(1, ceil(ratePerSecond)). */
  burst?: number;
  /** Requests handled at once; 0 disables the cap. Default {@link DEFAULT_MAX_CONCURRENT}. */
  maxConcurrent?: number;
  /** How long shutdown lets running requests finish; default {@link DEFAULT_SHUTDOWN_GRACE_MS}. */
  shutdownGraceMs?: number;
  /** Bound on one TLS handshake plus attestation exchange (adapter default 30 s). */
  handshakeTimeoutMs?: number;
  /** Connections in handshake beyond this are closed at once (adapter default 4096). */
  maxPendingHandshakes?: number;
  /** Largest attestation document accepted (adapter default 1 MiB). */
  maxDocumentBytes?: number;
  /** Unattested connections per source address (adapter default 32). */
  maxPendingPerSource?: number;
  /** Attestation verifications run at once (adapter default 2 × CPUs). */
  maxConcurrentVerifications?: number;
  /** Deadlines of the attested TLS phases that wait for the peer (adapter defaults: a few seconds). */
  atlsDeadlines?: Partial<AtlsDeadlines>;
  /**
   * Size the handshakes in progress from their measured cost (src/adapters/grpc/atls/admission-sizing.ts);
   * adapter default false: only the fixed caps.
   */
  sizedHandshakes?: boolean;
  /** At most one drop summary log line per this interval (adapter default 10 s). */
  dropLogIntervalMs?: number;
  /**
   * Memory budget in MiB; request, connection and message bounds are derived from it (memory.ts).
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

/**
 * Starts the join service: loads the deny list (fails closed on a missing or invalid file),
 * listens for attested gRPC and operations HTTP, and reports SERVING. Resolves once listening.
 * @throws when a dependency is invalid (empty salt or endpoint), the deny list cannot be loaded,
 *   or a port cannot be bound; whatever was started is stopped again
 */
export async function startJoinService(options: JoinServiceOptions): Promise<RunningJoinService> {
  if (options.validators.length === 0) throw new Error('starting join service: no attestation validator');
  const clock = options.clock ?? new SystemClock();
  const logger = options.logger ?? createPinoLogger({ base: { component: 'join-service' } });
  const limits = options.limits ?? {};
  // Throws before anything starts when the budget is too small.
  const memory = deriveMemoryBounds(
    limits.memoryBudgetMib ?? JOIN_SERVICE_MEMORY_BUDGET_MIB,
    limits.maxConcurrent ?? DEFAULT_MAX_CONCURRENT,
  );
  const metrics =
    options.metrics instanceof JoinServiceMetrics ? options.metrics : new JoinServiceMetrics(options.metrics);
  const health = new HealthStatus({
    '': ServingStatus.NOT_SERVING,
    [JOIN_HEALTH_SERVICE]: ServingStatus.NOT_SERVING,
  });
  const cleanups: Array<() => void | Promise<void>> = [];
  let grpcListening = false;
  let shuttingDown = false;

  const runCleanups = async () => {
    for (const c of cleanups.splice(0).reverse()) {
      try {
        await c();
      } catch (err) {
        logger.warn('Join service cleanup step failed', {
          error: messageOf(err),
        });
      }
    }
  };

  // Run after the servers stopped and the deny list closed, in the given order (see close()).
  for (const c of [...(options.onClose ?? [])].reverse()) cleanups.push(c);
  try {
    let denyList: DenyList = EMPTY_DENY_LIST;
    if (options.denyListPath !== undefined) {
      const file = await FileDenyList.start({
        path: options.denyListPath,
        logger,
        onReload: (o) => {
          metrics.configReloads.inc({ config: 'deny-list', result: o.ok ? 'ok' : 'error' });
          if (o.ok) {
            metrics.denyListEntries.set({ kind: 'node' }, o.nodes);
            metrics.denyListEntries.set({ kind: 'disk-uuid' }, o.diskUuids);
          }
        },
      });
      cleanups.push(() => file.close());
      denyList = file;
    }
    metrics.denyListEntries.set({ kind: 'node' }, denyList.size.nodes);
    metrics.denyListEntries.set({ kind: 'disk-uuid' }, denyList.size.diskUuids);

    // The issuer checks its own inputs (empty salt or endpoint) before anything listens.
    const issuer = new TicketIssuer({
      kms: options.kms,
      ca: options.ca,
      tokens: options.tokens,
      facts: options.facts,
      measurementSalt: options.measurementSalt,
      apiServerEndpoint: options.apiServerEndpoint,
      clock,
      logger,
      diskBindings: options.diskBindings ?? new InMemoryDiskBindings(),
      ...(options.identity ? { identity: options.identity } : {}),
      denyList,
    });

    const concurrency = new ConcurrencyLimiter(memory.maxConcurrent);
    const handler = new GuardedJoinHandler({
      issuer,
      rateLimiter: new TokenBucketRateLimiter({
        ratePerSecond: limits.ratePerSecond ?? DEFAULT_RATE_LIMIT_PER_SECOND,
        ...(limits.burst !== undefined ? { burst: limits.burst } : {}),
        clock,
      }),
      concurrency,
      requestBytes: new ByteBudget(memory.requestBytesInFlight),
      metrics,
      audit: logger,
      ...(options.evidence !== undefined ? { evidence: { store: options.evidence, clock } } : {}),
      ...(options.receiptKey !== undefined
        ? { receipts: { signer: options.receiptKey, clock, build: `confboot ${VERSION} join-service` } }
        : {}),
    });

    const validators = options.validators.map(
      (v) =>
        new TimedValidator(v, ({ variant, ok, seconds }) =>
          metrics.validationSeconds.observe({ variant, outcome: ok ? 'ok' : 'refused' }, seconds),
        ),
    );
    const server = createJoinServer({
      validators,
      clock,
      handler,
      logger,
      ...(limits.handshakeTimeoutMs !== undefined ? { handshakeTimeoutMs: limits.handshakeTimeoutMs } : {}),
      ...(limits.maxPendingHandshakes !== undefined
        ? { maxPendingHandshakes: limits.maxPendingHandshakes }
        : {}),
      ...(limits.maxDocumentBytes !== undefined ? { maxDocumentBytes: limits.maxDocumentBytes } : {}),
      admission: {
        ...(limits.atlsDeadlines !== undefined ? { deadlines: limits.atlsDeadlines } : {}),
        ...(limits.maxPendingPerSource !== undefined
          ? { maxPendingPerSource: limits.maxPendingPerSource }
          : {}),
        ...(limits.maxConcurrentVerifications !== undefined
          ? { maxConcurrentVerifications: limits.maxConcurrentVerifications }
          : {}),
        ...(limits.dropLogIntervalMs !== undefined ? { dropLogIntervalMs: limits.dropLogIntervalMs } : {}),
        ...(options.evidence !== undefined
          ? { onEvidenceRefused: recordRefusedEvidence(options.evidence, options.validators, clock) }
          : {}),
        ...(limits.sizedHandshakes !== undefined ? { sizedHandshakes: limits.sizedHandshakes } : {}),
      },
      maxMessageBytes: memory.maxMessageBytes,
      maxStreamsPerConnection: memory.maxStreamsPerConnection,
      maxSessionMemoryMib: memory.maxSessionMemoryMib,
      // A joining node makes one call per connection: a connection beyond the requests that can run
      // or wait would be verified only to be refused, so it waits for room before verification.
      maxConnections:
        concurrency.max === 0
          ? memory.maxConnections
          : Math.min(memory.maxConnections, concurrency.max + concurrency.maxQueue),
    });
    // Drops before attestation (caps, deadlines, peers closing) are counted, and summarised in the
    // log by the listener (one line per interval); they are not audited one by one.
    server.tls.onDropped = (_address, reason) => metrics.atlsDrops.inc({ reason });
    metrics.observeAtls(() => ({
      connections: server.tls.pendingHandshakes,
      sources: server.tls.pendingSources,
      verifying: server.tls.verifying,
    }));
    // Connections refused by attested TLS never reach a handler; they are audited here.
    server.tls.onRefused = (address, reason) => {
      const check = isAttestationError(reason) ? reason.check : undefined;
      const code = isConfbootError(reason) ? reason.code : 'permission-denied';
      const mismatches = auditMismatches(reason);
      if (isAttestationError(reason))
        metrics.attestationRefusals.inc({ reason_code: reason.reasonCode, check: reason.check });
      metrics.countRequest({
        rpc: 'attested-tls',
        outcome: 'refused',
        variant: 'unknown',
        reason: check ?? code,
      });
      emitAudit(logger, {
        event: AUDIT_EVENT,
        rpc: 'attested-tls',
        peer: address,
        variant: 'unknown',
        outcome: 'refused',
        code,
        reason: check ?? code,
        ...(isAttestationError(reason) ? { reasonCode: reason.reasonCode } : {}),
        detail: reason.message,
        ...(mismatches ? { mismatches } : {}),
        durationMs: 0,
      });
    };
    server.grpc.addService(HealthServiceDefinition, health.implementation());
    const listen = options.listen ?? { host: '0.0.0.0', port: JOIN_SERVICE_PORT };
    const grpcPort = await server.listen(listen.host, listen.port);
    grpcListening = true;
    const graceMs = limits.shutdownGraceMs ?? DEFAULT_SHUTDOWN_GRACE_MS;
    const stopGrpc = async () => {
      grpcListening = false;
      await server.shutdown(graceMs);
    };
    cleanups.push(stopGrpc);

    let grpcHealthPort: number | undefined;
    if (options.grpcHealthListen !== undefined) {
      const h = await startGrpcHealthServer(hostPort(options.grpcHealthListen), health);
      grpcHealthPort = h.port;
      // Stopped after the drain, so plain health probes see NOT_SERVING rather than a closed port.
      cleanups.splice(cleanups.indexOf(stopGrpc), 0, () => h.server.forceShutdown());
    }

    const readiness = (): ReadinessChecks => {
      const checks: ReadinessChecks = {
        validator: options.validators.length > 0,
        grpcListening,
        // The ticket issuer refused to be built without salt and endpoint; the rest are objects.
        dependencies: Boolean(options.kms && options.ca && options.tokens && options.facts),
        notShuttingDown: !shuttingDown,
      };
      for (const [name, check] of Object.entries(options.readinessChecks ?? {})) {
        try {
          checks[name] = check();
        } catch {
          checks[name] = false;
        }
      }
      return checks;
    };
    const httpListen = options.httpListen ?? { host: '0.0.0.0', port: JOIN_SERVICE_HTTP_PORT };
    const http: OperationsHttpServer = await startOperationsHttpServer({
      host: httpListen.host,
      port: httpListen.port,
      metrics,
      readiness,
      logger,
      ...(options.receiptKey !== undefined ? { jwks: () => options.receiptKey!.jwks() } : {}),
    });
    // Closed last, so probes see "not ready" while requests drain.
    cleanups.unshift(() => http.close());

    health.set('', ServingStatus.SERVING);
    health.set(JOIN_HEALTH_SERVICE, ServingStatus.SERVING);
    logger.info('Join service listening', {
      grpc: hostPort({ host: listen.host, port: grpcPort }),
      http: hostPort({ host: httpListen.host, port: http.port }),
      ...(grpcHealthPort !== undefined
        ? { grpcHealth: hostPort({ host: options.grpcHealthListen!.host, port: grpcHealthPort }) }
        : {}),
      variants: options.validators.map((v) => v.variant),
      memory,
      denyList: options.denyListPath ?? null,
      receiptKeyId: options.receiptKey?.keyId ?? null,
    });

    let closing: Promise<void> | undefined;
    let markClosed: () => void = () => {};
    const closed = new Promise<void>((resolve) => {
      markClosed = resolve;
    });
    const close = (): Promise<void> => {
      closing ??= (async () => {
        shuttingDown = true;
        logger.info('Join service shutting down', { inFlight: await inFlightNow(metrics), graceMs });
        health.shutdown();
        await runCleanups();
        options.signal?.removeEventListener('abort', onAbort);
        logger.info('Join service stopped');
        markClosed();
      })();
      return closing;
    };
    const onAbort = () => {
      void close();
    };
    if (options.signal?.aborted) void close();
    else options.signal?.addEventListener('abort', onAbort, { once: true });

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
  } catch (err) {
    await runCleanups();
    throw err;
  }
}

/** Records evidence refused during the handshake under the caller's address. */
function recordRefusedEvidence(
  store: EvidenceStore,
  validators: readonly Validator[],
  clock: Clock,
): (e: RefusedEvidence) => void {
  return (e) => {
    const address = e.peerAddress ?? 'unknown';
    void store.record({
      key: `address/${address}`,
      peer: address,
      variant: validators.find((v) => v.oid === e.oid)?.variant ?? 'unknown',
      oid: e.oid,
      document: e.document,
      nonce: e.nonce,
      rpc: 'attested-tls',
      outcome: 'refused',
      reason: isAttestationError(e.error) ? e.error.check : 'attestation',
      at: clock.now().toISOString(),
    });
  };
}

async function inFlightNow(metrics: JoinServiceMetrics): Promise<number> {
  const m = await metrics.inFlight.get();
  return m.values[0]?.value ?? 0;
}
