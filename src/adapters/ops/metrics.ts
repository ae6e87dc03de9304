/**
 * Join service: Prometheus metrics on a private prom-client Registry (served at /metrics). Several
 * services in one process (tests, benchmarks, the demo) never share or clash on metrics. Label
 * values come from fixed sets (outcome, rpc, error kind, variant, check name) so cardinality stays
 * bounded; nothing secret or caller-chosen becomes a label.
 */
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { JoinMetrics, JoinRequestOutcome, JoinRpc } from '../../ports/join-metrics.js';
import { isJoinRefusalReason, type JoinOutcomeReason } from '../../ports/join-refusal.js';

/** Outcome of one request, as audited and counted. */
export type JoinOutcome = JoinRequestOutcome;
/**
 * How often the process metrics sample the event loop's delay (`nodejs_eventloop_lag_*`), in ms.
 * prom-client's default is 10 ms: a timer that wakes the process 100 times a second for its whole
 * life. In a confidential VM every wakeup is a timer interrupt the guest pays extra for, and in a
 * TCG guest it was measured at 7 % of a core for an otherwise idle process (0.35 % without it). A
 * stall of the loop is still measured to the millisecond when a sample falls in it, and every stall
 * longer than the interval is.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** Options of {@link JoinServiceMetrics}. */
export interface JoinServiceMetricsOptions {
  /** Also collect prom-client's process metrics (CPU, RSS, event loop); default true. */
  processMetrics?: boolean;
}

/** The join service's metrics. */
export class JoinServiceMetrics implements JoinMetrics {
  /** The private registry; `/metrics` renders it. */
  readonly registry = new Registry();
  /** Requests by rpc, outcome, variant and reason (`ok` or a JoinRefusalReason). */
  readonly joins: Counter<'rpc' | 'outcome' | 'variant' | 'reason'>;
  /** Time spent validating attestation documents (the validator call inside attested TLS). */
  readonly validationSeconds: Histogram<'variant' | 'outcome'>;
  /** Time from the handler's start to the answer, by rpc and outcome. */
  readonly requestSeconds: Histogram<'rpc' | 'outcome'>;
  /** Requests being handled now. */
  readonly inFlight: Gauge;
  /** Deny-list entries by kind (node, disk-uuid). */
  readonly denyListEntries: Gauge<'kind'>;
  /** Reloads of watched configuration files by file and result. */
  readonly configReloads: Counter<'config' | 'result'>;
  /** Dry runs of a loaded attestation config against the recorded evidence, by result. */
  readonly configDryRuns: Counter<'result'>;
  /** Joined nodes the current attestation config would refuse on their recorded evidence. */
  readonly configDryRunRefusedJoined: Gauge;
  /** Unattested connections dropped by attested TLS admission, by reason (cap, deadline, peer closed). */
  readonly atlsDrops: Counter<'reason'>;
  /** Attestation refusals by stable reason code and failed check (docs/attestation-config.md). */
  readonly attestationRefusals: Counter<'reason_code' | 'check'>;
  /** Unattested connections held now, and their source addresses. */
  readonly atlsUnattested: Gauge<'kind'>;
  private atlsState: (() => { connections: number; sources: number; verifying: number }) | undefined;

  constructor(options: JoinServiceMetricsOptions = {}) {
    const registers = [this.registry];
    this.joins = new Counter({
      name: 'confboot_join_requests_total',
      help: 'Join and rejoin requests by rpc, outcome (issued/refused), attestation variant and reason',
      labelNames: ['rpc', 'outcome', 'variant', 'reason'],
      registers,
    });
    this.validationSeconds = new Histogram({
      name: 'confboot_attestation_validation_seconds',
      help: 'Attestation document validation time in attested TLS, by variant and outcome (ok/refused)',
      labelNames: ['variant', 'outcome'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    this.requestSeconds = new Histogram({
      name: 'confboot_join_request_duration_seconds',
      help: 'Time to answer a join or rejoin request once its connection is attested',
      labelNames: ['rpc', 'outcome'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.inFlight = new Gauge({
      name: 'confboot_join_requests_in_flight',
      help: 'Join and rejoin requests being handled now',
      registers,
    });
    this.denyListEntries = new Gauge({
      name: 'confboot_join_deny_list_entries',
      help: 'Entries in the deny list by kind (node, disk-uuid)',
      labelNames: ['kind'],
      registers,
    });
    this.configReloads = new Counter({
      name: 'confboot_join_config_reloads_total',
      help: 'Reloads of watched configuration files (attestation config, deny list) by result',
      labelNames: ['config', 'result'],
      registers,
    });
    this.configDryRuns = new Counter({
      name: 'confboot_join_config_dry_runs_total',
      help: 'Dry runs of a loaded attestation config against recorded evidence, by result (ok, would-refuse-joined, error)',
      labelNames: ['result'],
      registers,
    });
    this.configDryRunRefusedJoined = new Gauge({
      name: 'confboot_join_config_dry_run_refused_joined_nodes',
      help: 'Joined nodes the loaded attestation config would refuse on their recorded evidence (last dry run)',
      registers,
    });
    this.attestationRefusals = new Counter({
      name: 'confboot_attestation_refusals_total',
      help: 'Attestations refused, by stable reason code (measurement-mismatch, measurement-set-expired, ak-untrusted, signature-invalid, nonce-mismatch, tcb-out-of-date, tcb-revoked, …) and failed check',
      labelNames: ['reason_code', 'check'],
      registers,
    });
    this.atlsDrops = new Counter({
      name: 'confboot_atls_dropped_connections_total',
      help: 'Unattested connections dropped before attestation, by reason (source-cap, global-cap, evicted, client-hello-timeout, tls-handshake-timeout, attestation-timeout, verdict-timeout, handshake-timeout, peer-closed)',
      labelNames: ['reason'],
      registers,
    });
    const metrics = this;
    this.atlsUnattested = new Gauge({
      name: 'confboot_atls_unattested',
      help: 'Attested TLS admission now: unattested connections held (kind=connections), their source addresses (kind=sources), verifications running (kind=verifying)',
      labelNames: ['kind'],
      registers,
      collect() {
        const s = metrics.atlsState?.();
        if (s === undefined) return;
        this.set({ kind: 'connections' }, s.connections);
        this.set({ kind: 'sources' }, s.sources);
        this.set({ kind: 'verifying' }, s.verifying);
      },
    });
    if (options.processMetrics ?? true)
      collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_SAMPLE_MS });
  }

  /** Counts one request; a reason outside `ok` and the JoinRefusalReason set is counted as `internal`. */
  countRequest(labels: {
    rpc: JoinRpc;
    outcome: JoinOutcome;
    variant: string;
    reason: JoinOutcomeReason;
  }): void {
    // The reason label stays within its set even for an untyped caller.
    const reason = labels.reason === 'ok' || isJoinRefusalReason(labels.reason) ? labels.reason : 'internal';
    this.joins.inc({ ...labels, reason });
  }

  /** Records a decided request's duration in {@link requestSeconds}. */
  observeSeconds(labels: { rpc: JoinRpc; outcome: JoinOutcome }, seconds: number): void {
    this.requestSeconds.observe(labels, seconds);
  }

  /** Moves {@link inFlight} by one. */
  running(delta: 1 | -1): void {
    if (delta > 0) this.inFlight.inc();
    else this.inFlight.dec();
  }

  /** Reports attested TLS admission state through {@link atlsUnattested} at every scrape. */
  observeAtls(state: () => { connections: number; sources: number; verifying: number }): void {
    this.atlsState = state;
  }

  /** The Prometheus text exposition. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** Content type of {@link render}'s output. */
  get contentType(): string {
    return this.registry.contentType;
  }
}
