/**
 * Join refusals as Kubernetes Events (core/v1, @kubernetes/client-node), so `kubectl get events -n
 * kube-system` and `kubectl describe daemonset join-service` show who was refused and why. Events
 * regard the join service's DaemonSet (a refused caller's node name is its own claim, so no Node
 * object is named); the reason is the refusal's reason code in UpperCamelCase (`MeasurementSetExpired`),
 * the message names the caller, its node and disk when given, the variant and the detail. Text that
 * reaches a message is stripped of C0 and C1 control characters (and of Unicode direction and line
 * separators), so an Event cannot carry terminal escapes to whoever reads it (the CVE-2021-25743
 * class); the detail of a refusal during attested TLS, which can name what an unverified document
 * claims (certificate names), is quoted as such, never written as the join service's own words.
 *
 * Deduplicated like client-go's event correlator: refusals with the same reason from the same caller
 * (node name, else disk UUID, else address) within the dedupe window are one Event whose `count` and
 * `lastTimestamp` are patched (JSON merge patch), at most once per patch interval (the count in the
 * API lags by the refusals since the last patch). Rate-limited, with two budgets: refusals of attested
 * callers and refusals during attested TLS (callers that proved nothing, so anyone can cause them)
 * each have their own token bucket, writes at once and correlation cache, so a flood of unattested
 * refusals cannot suppress the Events of real refusals, and either costs the API server a bounded
 * trickle; what does not fit is dropped and counted. Recording never delays or fails a request.
 */
import { randomBytes } from 'node:crypto';
import { CoreV1Api, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Clock } from '../../ports/clock.js';
import { messageOf } from '../../ports/errors.js';
import type { EventRecorder, RefusalEvent } from '../../ports/event-recorder.js';
import type { Logger } from '../../ports/logger.js';
import { peerHost } from '../../ports/peer-address.js';
import { TokenBucketRateLimiter } from '../ops/limits.js';
import { call, DEFAULT_KUBE_REQUEST_TIMEOUT_MS, hasStatus, KUBE_SYSTEM, rfc3339 } from './api.js';

/** The object refusal events regard by default: the join service's DaemonSet in kube-system. */
export const JOIN_SERVICE_OBJECT = Object.freeze({
  apiVersion: 'apps/v1',
  kind: 'DaemonSet',
  namespace: KUBE_SYSTEM,
  name: 'join-service',
});

/** `source.component` and `reportingComponent` of every refusal event. */
export const EVENT_COMPONENT = 'confboot-join-service';

/** Defaults of {@link KubeEventRecorderOptions}. */
export const EVENT_RECORDER_DEFAULTS = Object.freeze({
  dedupeWindowMs: 10 * 60_000,
  patchIntervalMs: 60_000,
  burst: 25,
  writesPerSecond: 0.2,
  maxInFlight: 4,
  maxCallers: 1024,
});

/** Longest event message written (the detail is cut to fit). */
const MAX_MESSAGE_CHARS = 1024;

/** Whether `c` is a control or formatting code point no Event message may carry. */
function isControl(c: number): boolean {
  return (
    c < 0x20 || // C0, including ESC
    (c >= 0x7f && c <= 0x9f) || // DEL and C1, including CSI
    c === 0x200e ||
    c === 0x200f || // left-to-right and right-to-left marks
    c === 0x2028 ||
    c === 0x2029 || // line and paragraph separators
    (c >= 0x202a && c <= 0x202e) || // direction embeddings and overrides
    (c >= 0x2066 && c <= 0x2069) // direction isolates
  );
}

/** `text` without C0/C1 control characters, direction controls and line separators. */
export function stripControls(text: string): string {
  let out = '';
  for (const ch of text) if (!isControl(ch.codePointAt(0) as number)) out += ch;
  return out;
}

/** Options of {@link KubeEventRecorder}. */
export interface KubeEventRecorderOptions {
  kubeConfig: KubeConfig;
  clock: Clock;
  logger: Logger;
  /** The object the events regard; default {@link JOIN_SERVICE_OBJECT} (its namespace holds the events). */
  involvedObject?: { apiVersion: string; kind: string; namespace: string; name: string; uid?: string };
  /** `source.host` and `reportingInstance`, e.g. the pod name. */
  instance?: string;
  /** Repeats within this window of the last one are counted on the same Event. */
  dedupeWindowMs?: number;
  /** At most one count update per Event per this interval. */
  patchIntervalMs?: number;
  /** Writes (creates and patches) of each budget (attested, unattested): burst, then this many per second. */
  burst?: number;
  writesPerSecond?: number;
  /** Writes of each budget running at once; a refusal arriving beyond it is counted and written later or dropped. */
  maxInFlight?: number;
  /** Callers each budget's correlation cache holds (least recently refused forgotten first). */
  maxCallers?: number;
  /** Per-request timeout; default 10 s. */
  requestTimeoutInMs?: number;
}

/** One correlated series of refusals in the cache. */
interface Series {
  /** Name of the Event in the API, once created. */
  name?: string;
  firstMs: number;
  lastMs: number;
  /** Refusals seen. */
  count: number;
  lastWriteMs: number;
  writing: boolean;
  message: string;
}

/** One budget of Event writes: its correlation cache, token bucket and writes in flight. */
interface Lane {
  series: Map<string, Series>;
  bucket: TokenBucketRateLimiter;
  inFlight: Set<Promise<void>>;
}

/** `measurement-set-expired` → `MeasurementSetExpired` (an Event reason is UpperCamelCase). */
export function eventReason(event: Pick<RefusalEvent, 'reasonCode' | 'reason'>): string {
  const code = event.reasonCode ?? event.reason;
  const camel = code
    .split(/[^A-Za-z0-9]+/)
    .filter((w) => w !== '')
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');
  return camel === '' ? 'Refused' : camel.slice(0, 128);
}

/** `text` as a JSON string of at most `max` characters (cut, with `…`, to fit; quotes kept). */
function quotedWithin(text: string, max: number): string {
  let cut = text;
  let quoted = JSON.stringify(cut);
  // Each round cuts at least the excess; escapes at most double a character, so few rounds run.
  while (quoted.length > max && cut.length > 0) {
    cut = cut.slice(0, Math.max(0, cut.length - (quoted.length - max) - 1));
    quoted = JSON.stringify(`${cut}…`);
  }
  return quoted;
}

/**
 * The event message of a refusal, every field stripped of control characters. The detail of an
 * unattested refusal is quoted (JSON string) after `unverified document:`, so names it carries from
 * the document read as the document's claims.
 */
export function eventMessage(event: RefusalEvent): string {
  const who = [
    `from ${peerHost(event.peer)}`,
    event.nodeName !== undefined ? `node ${event.nodeName}` : undefined,
    event.diskUuid !== undefined ? `disk ${event.diskUuid}` : undefined,
    `variant ${event.variant}`,
  ].filter((s) => s !== undefined);
  const code = event.reasonCode ?? event.reason;
  const head = stripControls(`${event.rpc} refused (${who.join(', ')}): ${code}`);
  const detail = event.detail ? stripControls(event.detail) : '';
  const text =
    detail === ''
      ? head
      : event.attested
        ? `${head}: ${detail}`
        : `${head}: unverified document: ${quotedWithin(detail, MAX_MESSAGE_CHARS - head.length - 23)}`;
  return text.length > MAX_MESSAGE_CHARS ? `${text.slice(0, MAX_MESSAGE_CHARS - 1)}…` : text;
}

/** The object an Event regards. */
export interface RegardedObject {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  uid?: string;
}

/** One Warning Event series as first written. */
export interface WarningEvent {
  regarding: RegardedObject;
  reason: string;
  message: string;
  count: number;
  first: Date;
  last: Date;
  /** `source.component` and `reportingComponent`. */
  component: string;
  /** `reportingInstance` and `source.host` (omitted when empty). */
  instance: string;
  action: string;
}

/**
 * Creates the Warning Event of a new series, named as client-go names them (the regarded object's
 * name and a unique suffix); resolves to its name. Rejects like every Kubernetes call here.
 */
export async function createWarningEvent(
  core: CoreV1Api,
  e: WarningEvent,
  timeoutMs: number,
): Promise<string> {
  const { namespace } = e.regarding;
  const name = `${e.regarding.name}.${randomBytes(8).toString('hex')}`;
  await call(`creating Event ${namespace}/${name}`, timeoutMs, () =>
    core.createNamespacedEvent({
      namespace,
      body: {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name, namespace },
        involvedObject: { ...e.regarding },
        reason: e.reason,
        message: e.message,
        type: 'Warning',
        count: e.count,
        firstTimestamp: e.first,
        lastTimestamp: e.last,
        source: { component: e.component, ...(e.instance !== '' ? { host: e.instance } : {}) },
        reportingComponent: e.component,
        reportingInstance: e.instance,
        action: e.action,
      },
    }),
  );
  return name;
}

/** Patches a series' Event (JSON merge patch): its count, last time and message, as client-go's correlator does. */
export async function patchEventSeries(
  core: CoreV1Api,
  at: { namespace: string; name: string },
  update: { count: number; last: Date; message: string },
  timeoutMs: number,
): Promise<void> {
  await call(`updating Event ${at.namespace}/${at.name}`, timeoutMs, () =>
    core.patchNamespacedEvent(
      {
        name: at.name,
        namespace: at.namespace,
        body: { count: update.count, lastTimestamp: rfc3339(update.last), message: update.message },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ),
  );
}

/** See the module header. */
export class KubeEventRecorder implements EventRecorder {
  private readonly core: CoreV1Api;
  private readonly settings: { -readonly [K in keyof typeof EVENT_RECORDER_DEFAULTS]: number };
  private readonly involved: NonNullable<KubeEventRecorderOptions['involvedObject']>;
  /** The budgets of refusals of attested callers and of refusals during attested TLS. */
  private readonly lanes: { attested: Lane; unattested: Lane };
  /** Refusals whose write was dropped (rate limit, writes in flight) or failed. */
  dropped = 0;
  private lastDropLogMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: KubeEventRecorderOptions) {
    this.core = options.kubeConfig.makeApiClient(CoreV1Api);
    this.settings = {
      dedupeWindowMs: options.dedupeWindowMs ?? EVENT_RECORDER_DEFAULTS.dedupeWindowMs,
      patchIntervalMs: options.patchIntervalMs ?? EVENT_RECORDER_DEFAULTS.patchIntervalMs,
      burst: options.burst ?? EVENT_RECORDER_DEFAULTS.burst,
      writesPerSecond: options.writesPerSecond ?? EVENT_RECORDER_DEFAULTS.writesPerSecond,
      maxInFlight: options.maxInFlight ?? EVENT_RECORDER_DEFAULTS.maxInFlight,
      maxCallers: options.maxCallers ?? EVENT_RECORDER_DEFAULTS.maxCallers,
    };
    const lane = (): Lane => ({
      series: new Map(),
      bucket: new TokenBucketRateLimiter({
        ratePerSecond: this.settings.writesPerSecond,
        burst: this.settings.burst,
        clock: options.clock,
        maxTrackedSources: 1,
      }),
      inFlight: new Set(),
    });
    this.lanes = { attested: lane(), unattested: lane() };
    this.involved = options.involvedObject ?? { ...JOIN_SERVICE_OBJECT };
  }

  /** {@inheritDoc EventRecorder.refused} */
  refused(event: RefusalEvent): void {
    const now = this.options.clock.now().getTime();
    const reason = eventReason(event);
    const who = event.nodeName ?? event.diskUuid ?? peerHost(event.peer);
    const key = `${reason}\u0000${who}`;
    const lane = event.attested ? this.lanes.attested : this.lanes.unattested;
    const { series } = lane;
    let s = series.get(key);
    if (s !== undefined && now - s.lastMs > this.settings.dedupeWindowMs) {
      // The window passed: a new Event (the old one ages out of the API on its own).
      series.delete(key);
      s = undefined;
    }
    if (s === undefined) {
      if (series.size >= this.settings.maxCallers) {
        const oldest = series.keys().next().value;
        if (oldest !== undefined) series.delete(oldest);
      }
      s = { firstMs: now, lastMs: now, count: 0, lastWriteMs: now, writing: false, message: '' };
    }
    // Most recently refused last: the cache forgets the least recently refused caller first.
    series.delete(key);
    series.set(key, s);
    s.count++;
    s.lastMs = now;
    s.message = eventMessage(event);
    if (s.writing) return;
    if (s.name !== undefined && now - s.lastWriteMs < this.settings.patchIntervalMs) return;
    if (lane.inFlight.size >= this.settings.maxInFlight || !lane.bucket.tryTake('events')) {
      this.drop(now);
      return;
    }
    this.write(lane, key, s, reason);
  }

  /** Resolves once every write started so far has finished (tests, shutdown). */
  async idle(): Promise<void> {
    const inFlight = () => [...this.lanes.attested.inFlight, ...this.lanes.unattested.inFlight];
    while (inFlight().length > 0) await Promise.allSettled(inFlight());
  }

  private drop(now: number): void {
    this.dropped++;
    if (now - this.lastDropLogMs >= this.settings.dedupeWindowMs) {
      this.lastDropLogMs = now;
      this.options.logger.warn('Refusal events dropped by the event rate limit', { dropped: this.dropped });
    }
  }

  private write(lane: Lane, key: string, s: Series, reason: string): void {
    s.writing = true;
    const count = s.count;
    const p = (s.name === undefined ? this.create(s, reason, count) : this.patch(s, count))
      .then(() => {
        s.lastWriteMs = this.options.clock.now().getTime();
      })
      .catch((err: unknown) => {
        this.dropped++;
        // An Event gone from the API (aged out) is created afresh on the next refusal.
        if (hasStatus(err, 404)) lane.series.delete(key);
        this.options.logger.warn('Recording refusal event failed', { reason, error: messageOf(err) });
      })
      .finally(() => {
        s.writing = false;
        lane.inFlight.delete(p);
      });
    lane.inFlight.add(p);
  }

  private async create(s: Series, reason: string, count: number): Promise<void> {
    s.name = await createWarningEvent(
      this.core,
      {
        regarding: this.involved,
        reason,
        message: s.message,
        count,
        first: new Date(s.firstMs),
        last: new Date(s.lastMs),
        component: EVENT_COMPONENT,
        instance: this.options.instance ?? '',
        action: 'Join',
      },
      this.timeoutMs(),
    );
  }

  private async patch(s: Series, count: number): Promise<void> {
    await patchEventSeries(
      this.core,
      { namespace: this.involved.namespace, name: s.name as string },
      { count, last: new Date(s.lastMs), message: s.message },
      this.timeoutMs(),
    );
  }

  private timeoutMs(): number {
    return this.options.requestTimeoutInMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS;
  }
}
