/**
 * The join service's evidence record as a JSON-lines file under a state directory (adapter). Each
 * decision is appended as one line (one `appendFile` call, so a crash leaves at most a torn last
 * line, which loading skips); the latest line of a key wins. When the file holds twice as many lines
 * as records kept, it is compacted: the kept records are written to a temporary file that is renamed
 * over it (atomic rotation). Bounded: at most `maxRecords` records of issued tickets, and
 * `maxRefusedRecords` records of evidence refused during the handshake and as many of refused ticket
 * requests (so neither unauthenticated nor refused callers can push out the records of real nodes),
 * each document at most `maxDocumentBytes` (a larger
 * one is not kept), records older than `maxAgeMs` dropped. Loaded once at start; survives restarts.
 * Each process keeps its own file (single-process use: the demo, one join service with a state
 * directory); replicas share the cluster's store instead (src/adapters/kubernetes/evidence-store.ts).
 */
import { appendFile, mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Clock } from '../../ports/clock.js';
import { messageOf } from '../../ports/errors.js';
import type { EvidenceRecord, EvidenceStore } from '../../ports/evidence-store.js';
import type { Logger } from '../../ports/logger.js';

/** The file name under the state directory. */
export const EVIDENCE_FILE = 'evidence.jsonl';

/** Defaults of {@link JsonlEvidenceStoreOptions}. */
export const EVIDENCE_DEFAULTS = Object.freeze({
  maxRecords: 1000,
  maxRefusedRecords: 100,
  maxDocumentBytes: 256 * 1024,
  maxAgeMs: 90 * 24 * 3600 * 1000,
});

/** Options of {@link JsonlEvidenceStore.open}. */
export interface JsonlEvidenceStoreOptions {
  /** Directory of the file (created with mode 0700). */
  dir: string;
  clock: Clock;
  logger: Logger;
  /** Records of ticket requests kept (latest per disk). Default {@link EVIDENCE_DEFAULTS}. */
  maxRecords?: number;
  /** Records of evidence refused during the handshake kept (latest per address), and as many of refused ticket requests. */
  maxRefusedRecords?: number;
  /** Documents larger than this are not recorded. */
  maxDocumentBytes?: number;
  /** Retention: records older than this are dropped. */
  maxAgeMs?: number;
}

/** A record with its byte fields in base64. */
export interface EvidenceLine {
  key: string;
  nodeName?: string;
  peer: string;
  variant: string;
  oid: string;
  document: string;
  nonce: string;
  userData?: string;
  rpc: string;
  outcome: 'issued' | 'refused';
  reason: string;
  at: string;
  measurementSet?: string;
  receiptKid?: string;
  receiptStatus?: string;
}

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const bytes = (s: string) => new Uint8Array(Buffer.from(s, 'base64'));

/** The JSON form of a record (one line of the file; the spec of an EvidenceRecord resource). */
export function evidenceLine(r: EvidenceRecord): EvidenceLine {
  return {
    key: r.key,
    ...(r.nodeName !== undefined ? { nodeName: r.nodeName } : {}),
    peer: r.peer,
    variant: r.variant,
    oid: r.oid,
    document: b64(r.document),
    nonce: b64(r.nonce),
    ...(r.userData !== undefined ? { userData: b64(r.userData) } : {}),
    rpc: r.rpc,
    outcome: r.outcome,
    reason: r.reason,
    at: r.at,
    ...(r.measurementSet !== undefined ? { measurementSet: r.measurementSet } : {}),
    ...(r.receiptKid !== undefined ? { receiptKid: r.receiptKid } : {}),
    ...(r.receiptStatus !== undefined ? { receiptStatus: r.receiptStatus } : {}),
  };
}

/** Parses one line of an evidence file; undefined for a line that is not a record (e.g. torn). */
export function parseEvidenceLine(text: string): EvidenceRecord | undefined {
  let l: Partial<EvidenceLine>;
  try {
    l = JSON.parse(text) as Partial<EvidenceLine>;
  } catch {
    return undefined;
  }
  const str = (v: unknown) => typeof v === 'string';
  if (
    !str(l.key) ||
    !str(l.peer) ||
    !str(l.variant) ||
    !str(l.oid) ||
    !str(l.document) ||
    !str(l.nonce) ||
    !str(l.rpc) ||
    (l.outcome !== 'issued' && l.outcome !== 'refused') ||
    !str(l.reason) ||
    !str(l.at)
  )
    return undefined;
  return {
    key: l.key as string,
    ...(str(l.nodeName) ? { nodeName: l.nodeName as string } : {}),
    peer: l.peer as string,
    variant: l.variant as string,
    oid: l.oid as string,
    document: bytes(l.document as string),
    nonce: bytes(l.nonce as string),
    ...(str(l.userData) ? { userData: bytes(l.userData as string) } : {}),
    rpc: l.rpc as string,
    outcome: l.outcome,
    reason: l.reason as string,
    at: l.at as string,
    ...(str(l.measurementSet) ? { measurementSet: l.measurementSet as string } : {}),
    ...(str(l.receiptKid) ? { receiptKid: l.receiptKid as string } : {}),
    ...(str(l.receiptStatus) ? { receiptStatus: l.receiptStatus as string } : {}),
  };
}

/** Parses an evidence file: the latest record of each key, oldest first. Torn or foreign lines are skipped. */
export function parseEvidenceFile(text: string): EvidenceRecord[] {
  const latest = new Map<string, EvidenceRecord>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    const r = parseEvidenceLine(line);
    if (r === undefined) continue;
    latest.delete(r.key);
    latest.set(r.key, r);
  }
  return [...latest.values()];
}

/** Whether a record is of evidence refused during the handshake (kept under its own bound). */
export const isHandshakeRefusal = (r: Pick<EvidenceRecord, 'key'>) => r.key.startsWith('address/');

/** Whether a record is of a refused ticket request (kept under its own bound). */
export const isRefusedTicketRequest = (r: Pick<EvidenceRecord, 'key'>) => r.key.startsWith('refused-disk/');

/**
 * The class a record is bounded in: `address` (refused during the handshake), `refused` (a refused
 * ticket request) or `disk` (an issued ticket; records written before refusals had keys of their own
 * are here whatever their outcome).
 */
export function evidenceClass(r: Pick<EvidenceRecord, 'key'>): 'address' | 'refused' | 'disk' {
  if (isHandshakeRefusal(r)) return 'address';
  return isRefusedTicketRequest(r) ? 'refused' : 'disk';
}

/** The bounds every evidence store applies. */
export interface EvidenceBounds {
  maxRecords: number;
  maxRefusedRecords: number;
  maxAgeMs: number;
}

/**
 * The keys to drop from `records` (oldest first): those older than `maxAgeMs` before `now`, and the
 * oldest beyond each bound: `maxRecords` issued tickets, `maxRefusedRecords` handshake refusals and as
 * many refused ticket requests ({@link evidenceClass}).
 */
export function evidenceToDrop(
  records: ReadonlyArray<Pick<EvidenceRecord, 'key' | 'at'>>,
  bounds: EvidenceBounds,
  now: Date,
): Set<string> {
  const oldest = now.getTime() - bounds.maxAgeMs;
  const drop = new Set<string>();
  for (const r of records) if (!(Date.parse(r.at) >= oldest)) drop.add(r.key);
  for (const [cls, max] of [
    ['address', bounds.maxRefusedRecords],
    ['refused', bounds.maxRefusedRecords],
    ['disk', bounds.maxRecords],
  ] as const) {
    const keys = records.filter((r) => !drop.has(r.key) && evidenceClass(r) === cls).map((r) => r.key);
    for (const k of keys.slice(0, Math.max(0, keys.length - max))) drop.add(k);
  }
  return drop;
}

/** The evidence record in a JSON-lines file (see the module comment). */
export class JsonlEvidenceStore implements EvidenceStore {
  /** Latest record per key, in insertion order (oldest first). */
  private readonly records = new Map<string, EvidenceRecord>();
  private lines = 0;
  /** Serialises file writes so appends and compactions never interleave. */
  private queue: Promise<void> = Promise.resolve();

  private constructor(
    private readonly path: string,
    private readonly options: Required<Omit<JsonlEvidenceStoreOptions, 'dir'>>,
  ) {}

  /** The file a store in `dir` uses. */
  static pathIn(dir: string): string {
    return join(dir, EVIDENCE_FILE);
  }

  /** Opens (and loads) the store in `options.dir`, creating the directory. */
  static async open(options: JsonlEvidenceStoreOptions): Promise<JsonlEvidenceStore> {
    await mkdir(options.dir, { recursive: true, mode: 0o700 });
    const store = new JsonlEvidenceStore(JsonlEvidenceStore.pathIn(options.dir), {
      clock: options.clock,
      logger: options.logger,
      maxRecords: options.maxRecords ?? EVIDENCE_DEFAULTS.maxRecords,
      maxRefusedRecords: options.maxRefusedRecords ?? EVIDENCE_DEFAULTS.maxRefusedRecords,
      maxDocumentBytes: options.maxDocumentBytes ?? EVIDENCE_DEFAULTS.maxDocumentBytes,
      maxAgeMs: options.maxAgeMs ?? EVIDENCE_DEFAULTS.maxAgeMs,
    });
    let text = '';
    try {
      text = await readFile(store.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    for (const r of parseEvidenceFile(text)) store.records.set(r.key, r);
    store.lines = text.split('\n').filter((l) => l.trim() !== '').length;
    store.prune();
    return store;
  }

  async record(record: EvidenceRecord): Promise<void> {
    const { logger, maxDocumentBytes } = this.options;
    if (record.document.length > maxDocumentBytes) {
      logger.warn('Evidence not recorded: document too large', {
        key: record.key,
        bytes: record.document.length,
        maxDocumentBytes,
      });
      return;
    }
    const previous = this.records.get(record.key);
    // An issued rejoin names no node: it keeps the name its disk's issued join recorded. A refusal
    // carries only the name its own request gave.
    const r: EvidenceRecord =
      record.outcome === 'issued' && record.nodeName === undefined && previous?.nodeName !== undefined
        ? { ...record, nodeName: previous.nodeName }
        : record;
    this.records.delete(r.key);
    this.records.set(r.key, r);
    const evicted = this.prune();
    const write = async () => {
      if (evicted || this.lines + 1 > 2 * this.maxLines()) await this.compact();
      else {
        await appendFile(this.path, `${JSON.stringify(evidenceLine(r))}\n`, { mode: 0o600 });
        this.lines++;
      }
    };
    this.queue = this.queue.then(write).catch((err: unknown) => {
      logger.warn('Evidence not recorded', { key: r.key, error: messageOf(err) });
    });
    await this.queue;
  }

  async list(): Promise<EvidenceRecord[]> {
    this.prune();
    return [...this.records.values()];
  }

  private maxLines(): number {
    return this.options.maxRecords + 2 * this.options.maxRefusedRecords;
  }

  /** Drops expired records and the oldest beyond each bound; true when anything was dropped. */
  private prune(): boolean {
    const drop = evidenceToDrop([...this.records.values()], this.options, this.options.clock.now());
    for (const k of drop) this.records.delete(k);
    return drop.size > 0;
  }

  /** Rewrites the file with the records kept: a temporary file renamed over it. */
  private async compact(): Promise<void> {
    const tmp = `${this.path}.tmp`;
    const text = [...this.records.values()].map((r) => `${JSON.stringify(evidenceLine(r))}\n`).join('');
    await writeFile(tmp, text, { mode: 0o600 });
    await rename(tmp, this.path);
    this.lines = this.records.size;
  }
}
