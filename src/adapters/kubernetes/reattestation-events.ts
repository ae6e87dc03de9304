/**
 * Failed re-attestations as Kubernetes Events (core/v1, @kubernetes/client-node), so `kubectl get
 * events -n kube-system` shows which node failed and why. An Event regards the node operator's
 * Deployment in kube-system (the operator is what judged), names the node in its message, and has
 * the reason code as its reason in UpperCamelCase after `Reattestation` (`ReattestationMeasurementMismatch`);
 * its source is {@link REATTESTATION_EVENT_COMPONENT}, so the join service's refusal Events and
 * these are never mixed up.
 *
 * A node that keeps failing for the same reason is one Event whose `count` and `lastTimestamp` are
 * patched (JSON merge patch) each round, as client-go's correlator does. Bounded: at most
 * `maxQueued` Events wait (the latest per node and reason), `maxInFlight` writes run at once, and
 * `maxSeries` series are remembered (the oldest forgotten first); what does not fit is dropped and
 * counted. Reporting never delays or fails a round.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../../ports/clock.js';
import { messageOf } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type {
  ReattestationEvents,
  ReattestationResult,
  ReattestationTarget,
} from '../../ports/reattestation.js';
import { DEFAULT_KUBE_REQUEST_TIMEOUT_MS, KUBE_SYSTEM } from './api.js';
import { createWarningEvent, patchEventSeries, stripControls } from './event-recorder.js';

/** `source.component` and `reportingComponent` of every re-attestation Event. */
export const REATTESTATION_EVENT_COMPONENT = 'confboot-node-operator';

/** The object the Events regard: the node operator's Deployment. */
export const NODE_OPERATOR_OBJECT = Object.freeze({
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  namespace: KUBE_SYSTEM,
  name: 'node-operator',
});

/** Defaults of {@link KubeReattestationEventsOptions}. */
export const REATTESTATION_EVENT_DEFAULTS = Object.freeze({
  maxQueued: 1024,
  maxInFlight: 4,
  maxSeries: 4096,
});

/** Longest message written. */
const MAX_MESSAGE_CHARS = 1024;

/** `measurement-mismatch` → `ReattestationMeasurementMismatch`. */
export function reattestationEventReason(reason: string): string {
  const camel = reason
    .split(/[^A-Za-z0-9]+/)
    .filter((w) => w !== '')
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');
  return `Reattestation${camel}`.slice(0, 128);
}

/** The message of a failed re-attestation, stripped of control characters. */
export function reattestationEventMessage(target: ReattestationTarget, result: ReattestationResult): string {
  const where = target.address === undefined ? '' : ` at ${target.address}`;
  const text = stripControls(
    `re-attestation of node ${target.nodeName}${where} failed: ${result.reason}${result.detail ? `: ${result.detail}` : ''}`,
  );
  return text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS - 1)}…` : text;
}

/** Options of {@link KubeReattestationEvents}. */
export interface KubeReattestationEventsOptions {
  kubeConfig: KubeConfig;
  clock: Pick<Clock, 'now'>;
  logger: Logger;
  /** `reportingInstance`, e.g. the pod name. */
  instance?: string;
  maxQueued?: number;
  maxInFlight?: number;
  maxSeries?: number;
  /** Per-request timeout; default 10 s. */
  requestTimeoutInMs?: number;
}

interface Series {
  name?: string;
  first: Date;
  count: number;
}

interface Pending {
  key: string;
  reason: string;
  message: string;
  at: Date;
}

/** See the module header. */
export class KubeReattestationEvents implements ReattestationEvents {
  private readonly core: CoreV1Api;
  private readonly limits: { maxQueued: number; maxInFlight: number; maxSeries: number };
  private readonly series = new Map<string, Series>();
  private readonly queue = new Map<string, Pending>();
  private inFlight = 0;
  private readonly idleWaiters: Array<() => void> = [];
  /** Events dropped (queue full) or whose write failed. */
  dropped = 0;

  constructor(private readonly options: KubeReattestationEventsOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.limits = {
      maxQueued: options.maxQueued ?? REATTESTATION_EVENT_DEFAULTS.maxQueued,
      maxInFlight: options.maxInFlight ?? REATTESTATION_EVENT_DEFAULTS.maxInFlight,
      maxSeries: options.maxSeries ?? REATTESTATION_EVENT_DEFAULTS.maxSeries,
    };
  }

  /** {@inheritDoc ReattestationEvents.failed} */
  failed(target: ReattestationTarget, result: ReattestationResult): void {
    const key = `${target.nodeName}\u0000${result.reason}`;
    if (!this.queue.has(key) && this.queue.size >= this.limits.maxQueued) {
      this.dropped++;
      return;
    }
    this.queue.set(key, {
      key,
      reason: reattestationEventReason(result.reason),
      message: reattestationEventMessage(target, result),
      at: this.options.clock.now(),
    });
    this.pump();
  }

  /** Resolves once every queued Event is written (or dropped). */
  async idle(): Promise<void> {
    if (this.inFlight > 0 || this.queue.size > 0) await new Promise<void>((r) => this.idleWaiters.push(r));
  }

  private pump(): void {
    while (this.inFlight < this.limits.maxInFlight && this.queue.size > 0) {
      const [key, pending] = this.queue.entries().next().value as [string, Pending];
      this.queue.delete(key);
      this.inFlight++;
      void this.write(pending)
        .catch((err: unknown) => {
          this.dropped++;
          this.options.logger.warn('Re-attestation Event not written', { error: messageOf(err) });
        })
        .finally(() => {
          this.inFlight--;
          this.pump();
          if (this.inFlight === 0 && this.queue.size === 0) for (const w of this.idleWaiters.splice(0)) w();
        });
    }
  }

  private async write(p: Pending): Promise<void> {
    const { namespace } = NODE_OPERATOR_OBJECT;
    const s = this.series.get(p.key);
    if (s?.name !== undefined) {
      s.count++;
      await patchEventSeries(
        this.core,
        { namespace, name: s.name },
        { count: s.count, last: p.at, message: p.message },
        this.timeoutMs(),
      );
      return;
    }
    const name = await createWarningEvent(
      this.core,
      {
        regarding: NODE_OPERATOR_OBJECT,
        reason: p.reason,
        message: p.message,
        count: 1,
        first: p.at,
        last: p.at,
        component: REATTESTATION_EVENT_COMPONENT,
        instance: this.options.instance ?? '',
        action: 'Reattest',
      },
      this.timeoutMs(),
    );
    if (this.series.size >= this.limits.maxSeries) {
      const oldest = this.series.keys().next().value;
      if (oldest !== undefined) this.series.delete(oldest);
    }
    this.series.set(p.key, { name, first: p.at, count: 1 });
  }

  private timeoutMs(): number {
    return this.options.requestTimeoutInMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS;
  }
}
