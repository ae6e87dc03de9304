/**
 * The DenyList port over a watched file (per-node revocation, which upstream lacks). A JSON
 * file `{"nodes": ["worker-3"], "diskUuids": ["…"]}` names nodes (the kubelet CSR's CN without
 * `system:node:`, spelt as the ticket issuer records them: foldNodeName) and state disks that must never get
 * a join or rejoin ticket. The file is watched through its DIRECTORY, so ConfigMap `..data` symlink
 * swaps and write-then-rename replacements are seen; an invalid or unreadable new file keeps the last
 * good list and is logged. The initial file must be valid: a revocation list that silently starts
 * empty would un-revoke nodes. Following the file is the shared WatchedFile (./watched-file.ts);
 * this module adds the list's format and lookups.
 */
import type { DenyList, DenyListIdentity, DenyMatch } from '../../ports/deny-list.js';
import { ConfbootError, messageOf } from '../../ports/errors.js';
import { foldNodeName } from '../../ports/kubernetes-node.js';
import type { Logger } from '../../ports/logger.js';
import { FILE_UTF8_TEXT, WatchedFile, type WatchedFileLabels } from './watched-file.js';

/** The parsed deny list. Node names are normalised, disk UUIDs lower-cased. */
export interface DenyListEntries {
  nodes: ReadonlySet<string>;
  diskUuids: ReadonlySet<string>;
}

const ALLOWED_KEYS = new Set(['nodes', 'diskUuids']);

function stringList(value: unknown, field: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value))
    throw new ConfbootError('invalid-argument', `"${field}" must be an array of strings`);
  return value.map((v, i) => {
    if (typeof v !== 'string' || v.trim() === '')
      throw new ConfbootError('invalid-argument', `"${field}"[${i}] must be a non-empty string`);
    return v.trim();
  });
}

/**
 * Parses deny-list JSON text. Unknown top-level keys are errors (a misspelt "node" must not
 * silently deny nobody); both lists are optional.
 * @throws ConfbootError `invalid-argument` naming the problem
 */
export function parseDenyList(text: string): DenyListEntries {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ConfbootError('invalid-argument', `deny list is not JSON: ${messageOf(err)}`, {
      cause: err,
    });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ConfbootError(
      'invalid-argument',
      'deny list must be an object {"nodes": [...], "diskUuids": [...]}',
    );
  const unknown = Object.keys(value).find((k) => !ALLOWED_KEYS.has(k));
  if (unknown !== undefined)
    throw new ConfbootError(
      'invalid-argument',
      `deny list has unknown field ${JSON.stringify(unknown)} (allowed: "nodes", "diskUuids")`,
    );
  const v = value as { nodes?: unknown; diskUuids?: unknown };
  return {
    nodes: new Set(stringList(v.nodes, 'nodes').map(foldNodeName)),
    diskUuids: new Set(stringList(v.diskUuids, 'diskUuids').map((u) => u.toLowerCase())),
  };
}

/** Outcome of one reload attempt. */
export type DenyListReloadOutcome =
  | { ok: true; changed: boolean; nodes: number; diskUuids: number }
  | { ok: false; error: Error };

/** Options of {@link FileDenyList.start}. */
export interface FileDenyListOptions {
  /** The deny-list file, e.g. `/var/config/denylist/denylist.json`. */
  path: string;
  logger: Logger;
  /** Called after every reload attempt (metrics, tests). */
  onReload?: (outcome: DenyListReloadOutcome) => void;
}

function matchEntries(entries: DenyListEntries, identity: DenyListIdentity): DenyMatch | undefined {
  if (identity.diskUuid !== undefined && entries.diskUuids.has(identity.diskUuid.toLowerCase()))
    return { kind: 'disk-uuid', value: identity.diskUuid.toLowerCase() };
  if (identity.nodeName !== undefined) {
    const name = foldNodeName(identity.nodeName);
    if (entries.nodes.has(name)) return { kind: 'node', value: name };
  }
  return undefined;
}

const LABELS: WatchedFileLabels = {
  subject: 'deny list',
  kept: 'list',
  parseStart: 'loading',
  parseUpdate: 'updating',
};

function sizes(entries: DenyListEntries): { nodes: number; diskUuids: number } {
  return { nodes: entries.nodes.size, diskUuids: entries.diskUuids.size };
}

/** A deny list that follows a file; lookups read the current immutable list without a lock. */
export class FileDenyList implements DenyList {
  private constructor(private readonly file: WatchedFile<DenyListEntries, string>) {}

  /**
   * Loads the file and starts watching its directory.
   * @throws ConfbootError `failed-precondition` when the file is missing or invalid
   */
  static async start(options: FileDenyListOptions): Promise<FileDenyList> {
    const file = await WatchedFile.start<DenyListEntries, string>({
      path: options.path,
      content: FILE_UTF8_TEXT,
      parse: (text) => parseDenyList(text),
      logger: options.logger,
      labels: LABELS,
      logFields: sizes,
      onReload: (outcome, current) =>
        options.onReload?.(outcome.ok ? { ...outcome, ...sizes(current) } : outcome),
    });
    return new FileDenyList(file);
  }

  /** {@inheritDoc DenyList.match} */
  match(identity: DenyListIdentity): DenyMatch | undefined {
    return matchEntries(this.file.current, identity);
  }

  /** {@inheritDoc DenyList.size} */
  get size(): { nodes: number; diskUuids: number } {
    return sizes(this.file.current);
  }

  /** Re-reads the file now (also triggered by every change in its directory); resolves when done. */
  reload(): Promise<void> {
    return this.file.reload();
  }

  /** Stops watching; lookups keep answering from the last good list. Waits for a running reload. */
  close(): Promise<void> {
    return this.file.close();
  }
}
