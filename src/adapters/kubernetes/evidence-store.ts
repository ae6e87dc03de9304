/**
 * The join service's evidence record in the cluster (adapter, @kubernetes/client-node): one
 * cluster-scoped EvidenceRecord resource (`confboot.dev/v1alpha1`) per key, shared by every join
 * service replica and kept across restarts, as DiskBinding resources are. The spec is the record as
 * the JSON-lines store writes it (byte fields in base64); the label `confboot.dev/evidence` says
 * whether it is an issued ticket (`disk`), a refused ticket request (`refused`) or evidence refused
 * during the handshake (`address`).
 *
 * Writing is one server-side apply (field manager `join-service`), so the latest decision of a key
 * replaces the previous one whichever replica made it; an issued rejoin, which names no node, keeps
 * the node name of the stored record. Writes run in the background, so a ticket never waits for the API
 * server: a bounded queue (latest record per key), two writes at once, and a rate limit on records of
 * handshake refusals (which unauthenticated callers cause); what does not fit is dropped and counted. Bounded like the file store: documents larger than the limit are not
 * recorded; every `pruneEvery` records (and at the first record after start) one replica lists the
 * records page by page (bounded memory) and deletes those past the retention and the oldest beyond
 * each bound; `list` applies the same bounds to what it returns, so a lagging prune never shows
 * more. Recording never rejects: a record the API refuses is dropped and logged.
 */
import { createHash } from 'node:crypto';
import { CustomObjectsApi, type KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import type { Clock } from '../../ports/clock.js';
import { messageOf } from '../../ports/errors.js';
import type { EvidenceRecord, EvidenceStore } from '../../ports/evidence-store.js';
import type { Logger } from '../../ports/logger.js';
import { TokenBucketRateLimiter } from '../ops/limits.js';
import {
  EVIDENCE_DEFAULTS,
  type EvidenceBounds,
  evidenceClass,
  evidenceLine,
  evidenceToDrop,
  isHandshakeRefusal,
  parseEvidenceLine,
} from '../state/jsonl-evidence-store.js';
import { call, DEFAULT_KUBE_REQUEST_TIMEOUT_MS, hasStatus, JOIN_SERVICE_FIELD_MANAGER } from './api.js';
import { DISK_BINDING_GROUP, DISK_BINDING_VERSION } from './names.js';

/** Group, version, kind and plural of the EvidenceRecord resource (cluster-scoped). */
export const EVIDENCE_GROUP = DISK_BINDING_GROUP;
export const EVIDENCE_VERSION = DISK_BINDING_VERSION;
export const EVIDENCE_KIND = 'EvidenceRecord';
export const EVIDENCE_PLURAL = 'evidencerecords';
/** Label telling issued tickets (`disk`), refused ticket requests (`refused`) and handshake refusals (`address`) apart. */
export const EVIDENCE_CLASS_LABEL = 'confboot.dev/evidence';

/** Records read per LIST page at most (the page also stays under a few MiB of documents). */
const MAX_PAGE = 100;
const PAGE_BYTES = 4 * 1024 * 1024;

/**
 * The resource name of a record key: `disk-<uuid>` for an issued ticket's disk UUID,
 * `refused-disk-<uuid>` for a refused request's, else `<class>-<hash of the key>`.
 */
export function evidenceRecordName(key: string): string {
  const disk = /^(disk|refused-disk)\/([0-9a-f-]{1,64})$/.exec(key.toLowerCase());
  if (disk) return `${disk[1]}-${disk[2]}`;
  const kind = isHandshakeRefusal({ key }) ? 'address' : 'key';
  return `${kind}-${createHash('sha256').update(key).digest('hex').slice(0, 32)}`;
}

/** Options of {@link KubeEvidenceStore}. */
export interface KubeEvidenceStoreOptions {
  kubeConfig: KubeConfig;
  clock: Clock;
  logger: Logger;
  /** Records of ticket requests kept (latest per disk). Default as the file store. */
  maxRecords?: number;
  /** Records of evidence refused during the handshake kept (latest per address), and as many of refused ticket requests. */
  maxRefusedRecords?: number;
  /** Documents larger than this are not recorded. */
  maxDocumentBytes?: number;
  /** Retention: records older than this are dropped. */
  maxAgeMs?: number;
  /** Prune after this many records written by this process (default 50). */
  pruneEvery?: number;
  /** Per-request timeout; default 10 s. */
  requestTimeoutInMs?: number;
  /** Bounds of the background writes; default {@link EVIDENCE_WRITE_LIMITS}. */
  writeLimits?: Partial<typeof EVIDENCE_WRITE_LIMITS>;
}

/**
 * Bounds of the background writes: records waiting (each holds a document), writes at once, and
 * the rate of handshake-refusal records (burst, then per second), which unauthenticated callers cause.
 */
export const EVIDENCE_WRITE_LIMITS: {
  queued: number;
  inFlight: number;
  handshakeRefusalBurst: number;
  handshakeRefusalsPerSecond: number;
} = Object.freeze({ queued: 256, inFlight: 2, handshakeRefusalBurst: 20, handshakeRefusalsPerSecond: 0.5 });

/** See the module header. */
export class KubeEvidenceStore implements EvidenceStore {
  private readonly custom: CustomObjectsApi;
  private readonly bounds: EvidenceBounds;
  private readonly maxDocumentBytes: number;
  private readonly pruneEvery: number;
  private writtenSincePrune: number;
  private pruning: Promise<void> | undefined;
  private readonly target = { group: EVIDENCE_GROUP, version: EVIDENCE_VERSION, plural: EVIDENCE_PLURAL };
  /** Records waiting to be written, latest per key, oldest key first. */
  private readonly queue = new Map<string, EvidenceRecord>();
  private writing = 0;
  private readonly idleWaiters: Array<() => void> = [];
  private readonly limits: typeof EVIDENCE_WRITE_LIMITS;
  private readonly refusalRate: TokenBucketRateLimiter;
  private droppedCount = 0;
  private lastDropLogMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly options: KubeEvidenceStoreOptions) {
    this.custom = options.kubeConfig.makeApiClient(CustomObjectsApi);
    this.bounds = {
      maxRecords: options.maxRecords ?? EVIDENCE_DEFAULTS.maxRecords,
      maxRefusedRecords: options.maxRefusedRecords ?? EVIDENCE_DEFAULTS.maxRefusedRecords,
      maxAgeMs: options.maxAgeMs ?? EVIDENCE_DEFAULTS.maxAgeMs,
    };
    this.maxDocumentBytes = options.maxDocumentBytes ?? EVIDENCE_DEFAULTS.maxDocumentBytes;
    this.pruneEvery = options.pruneEvery ?? 50;
    // The first record after a start prunes what earlier processes left.
    this.writtenSincePrune = this.pruneEvery;
    this.limits = { ...EVIDENCE_WRITE_LIMITS, ...options.writeLimits };
    this.refusalRate = new TokenBucketRateLimiter({
      ratePerSecond: this.limits.handshakeRefusalsPerSecond,
      burst: this.limits.handshakeRefusalBurst,
      clock: options.clock,
      maxTrackedSources: 1,
    });
  }

  private timeoutMs(): number {
    return this.options.requestTimeoutInMs ?? DEFAULT_KUBE_REQUEST_TIMEOUT_MS;
  }

  /**
   * {@inheritDoc EvidenceStore.record} Resolves at once: the record is queued (the latest per key)
   * and written in the background, at most {@link EVIDENCE_WRITE_LIMITS}.inFlight at a time; a record
   * beyond the queue's bound, or a handshake refusal beyond its rate, is dropped and counted.
   */
  async record(record: EvidenceRecord): Promise<void> {
    const { logger } = this.options;
    if (record.document.length > this.maxDocumentBytes) {
      logger.warn('Evidence not recorded: document too large', {
        key: record.key,
        bytes: record.document.length,
        maxDocumentBytes: this.maxDocumentBytes,
      });
      return;
    }
    const queued = this.queue.has(record.key);
    // Refusals during the handshake come from callers that never attested: their rate is bounded.
    if (!queued && isHandshakeRefusal(record) && !this.refusalRate.tryTake('handshake')) {
      this.drop(record.key, 'handshake refusals over their rate');
      return;
    }
    if (!queued && this.queue.size >= this.limits.queued) {
      this.drop(record.key, 'write queue full');
      return;
    }
    // The latest decision of a key replaces one still waiting.
    this.queue.set(record.key, record);
    this.pump();
  }

  /** Records dropped (queue full, rate) since the start. */
  get dropped(): number {
    return this.droppedCount;
  }

  private drop(key: string, why: string): void {
    this.droppedCount++;
    const now = this.options.clock.now().getTime();
    if (now - this.lastDropLogMs < 60_000) return;
    this.lastDropLogMs = now;
    this.options.logger.warn('Evidence not recorded', { key, why, dropped: this.droppedCount });
  }

  /** Starts writers for queued records, up to the bound of writes in flight. */
  private pump(): void {
    while (this.writing < this.limits.inFlight && this.queue.size > 0) {
      const [key, record] = this.queue.entries().next().value as [string, EvidenceRecord];
      this.queue.delete(key);
      this.writing++;
      void this.write(record).finally(() => {
        this.writing--;
        this.pump();
        if (this.writing === 0 && this.queue.size === 0) for (const w of this.idleWaiters.splice(0)) w();
      });
    }
  }

  private async write(record: EvidenceRecord): Promise<void> {
    const { logger } = this.options;
    const name = evidenceRecordName(record.key);
    try {
      let r = record;
      // An issued rejoin names no node: it keeps the name its disk's issued join recorded. A
      // refusal carries only the name its own request gave.
      if (r.outcome === 'issued' && r.nodeName === undefined && !isHandshakeRefusal(r)) {
        const previous = await this.read(name);
        if (previous?.key === r.key && previous.nodeName !== undefined)
          r = { ...r, nodeName: previous.nodeName };
      }
      const body = {
        apiVersion: `${EVIDENCE_GROUP}/${EVIDENCE_VERSION}`,
        kind: EVIDENCE_KIND,
        metadata: { name, labels: { [EVIDENCE_CLASS_LABEL]: evidenceClass(r) } },
        spec: evidenceLine(r),
      };
      await call(`applying ${EVIDENCE_KIND} ${name}`, this.timeoutMs(), () =>
        this.custom.patchClusterCustomObject(
          { ...this.target, name, body, fieldManager: JOIN_SERVICE_FIELD_MANAGER, force: true },
          setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
        ),
      );
    } catch (err) {
      logger.warn('Evidence not recorded', { key: record.key, error: messageOf(err) });
      return;
    }
    if (++this.writtenSincePrune >= this.pruneEvery && this.pruning === undefined) {
      this.writtenSincePrune = 0;
      this.pruning = this.prune()
        .then(() => {})
        .catch((err: unknown) => logger.warn('Pruning evidence records failed', { error: messageOf(err) }))
        .finally(() => {
          this.pruning = undefined;
        });
    }
  }

  /** {@inheritDoc EvidenceStore.list} */
  async list(): Promise<EvidenceRecord[]> {
    const records: EvidenceRecord[] = [];
    await this.eachPage((items) => {
      for (const item of items) {
        const r = parseEvidenceLine(JSON.stringify(item.spec ?? null));
        if (r !== undefined) records.push(r);
      }
    });
    records.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
    const drop = evidenceToDrop(records, this.bounds, this.options.clock.now());
    return records.filter((r) => !drop.has(r.key));
  }

  /** Resolves once every queued record is written (or dropped) and a prune it started has finished. */
  async idle(): Promise<void> {
    if (this.writing > 0 || this.queue.size > 0) await new Promise<void>((r) => this.idleWaiters.push(r));
    await this.pruning;
  }

  /** Deletes the records past the retention and the oldest beyond each bound. */
  async prune(): Promise<number> {
    const seen: Array<{ key: string; at: string; name: string }> = [];
    await this.eachPage((items) => {
      for (const item of items) {
        const spec = (item.spec ?? {}) as { key?: unknown; at?: unknown };
        const name = item.metadata?.name;
        if (typeof name !== 'string') continue;
        // A resource that is not a record counts as the oldest: it goes first.
        seen.push({
          name,
          key: typeof spec.key === 'string' ? spec.key : `?/${name}`,
          at: typeof spec.at === 'string' ? spec.at : '',
        });
      }
    });
    seen.sort((a, b) => (Date.parse(a.at) || 0) - (Date.parse(b.at) || 0));
    const drop = evidenceToDrop(seen, this.bounds, this.options.clock.now());
    let deleted = 0;
    for (const s of seen) {
      if (!drop.has(s.key)) continue;
      try {
        await call(`deleting ${EVIDENCE_KIND} ${s.name}`, this.timeoutMs(), () =>
          this.custom.deleteClusterCustomObject({ ...this.target, name: s.name }),
        );
        deleted++;
      } catch (err) {
        // Another replica deleted it first.
        if (!hasStatus(err, 404)) throw err;
      }
    }
    if (deleted > 0)
      this.options.logger.info('Pruned evidence records', { deleted, kept: seen.length - drop.size });
    return deleted;
  }

  /** The record stored under `name`; undefined when there is none. */
  private async read(name: string): Promise<EvidenceRecord | undefined> {
    try {
      const item = (await call(`reading ${EVIDENCE_KIND} ${name}`, this.timeoutMs(), () =>
        this.custom.getClusterCustomObject({ ...this.target, name }),
      )) as { spec?: unknown };
      return parseEvidenceLine(JSON.stringify(item?.spec ?? null));
    } catch (err) {
      if (hasStatus(err, 404)) return undefined;
      throw err;
    }
  }

  /** Lists every record page by page, handing each page's items to `visit`. */
  private async eachPage(
    visit: (items: Array<{ metadata?: { name?: string }; spec?: Record<string, unknown> }>) => void,
  ): Promise<void> {
    const limit = Math.max(1, Math.min(MAX_PAGE, Math.floor(PAGE_BYTES / this.maxDocumentBytes)));
    let next: string | undefined;
    // Far more pages than the bounds keep only when the server misbehaves: bounded.
    const maxPages =
      Math.ceil((10 * (this.bounds.maxRecords + 2 * this.bounds.maxRefusedRecords)) / limit) + 10;
    for (let page = 0; page < maxPages; page++) {
      const list = (await call(`listing ${EVIDENCE_KIND}s`, this.timeoutMs(), () =>
        this.custom.listClusterCustomObject({
          ...this.target,
          limit,
          ...(next !== undefined ? { _continue: next } : {}),
        }),
      )) as { items?: unknown; metadata?: { _continue?: unknown; continue?: unknown } };
      visit(Array.isArray(list?.items) ? list.items : []);
      const token = list?.metadata?.continue ?? list?.metadata?._continue;
      if (typeof token !== 'string' || token === '') return;
      next = token;
    }
    throw new Error(`listing ${EVIDENCE_KIND}s: more than ${maxPages} pages`);
  }
}
