import type { CallOptions } from './types.js';

/** One DiskBinding record as stored (see disk-bindings.ts for what a binding means). */
export interface DiskBindingRecord {
  /** The record's name (`disk-<uuid>`). */
  name: string;
  nodeName: string;
  owner: string;
  /** Whether it carries its owner's digest label (records written before the label existed do not). */
  labelled: boolean;
  /** When the record was created. */
  createdAt: Date;
}

/** The DiskBinding records as the node operator maintains them. */
export interface DiskBindingRecords {
  /** Every record. Rejects (usually `unavailable`) when they cannot be read. */
  list(options?: CallOptions): Promise<DiskBindingRecord[]>;
  /** Adds the owner's digest label to record `name` (owner `owner`), so owner lookups find it. */
  label(name: string, owner: string, options?: CallOptions): Promise<void>;
  /** Deletes record `name` (the disk is free again); resolves also when it is already gone. */
  release(name: string, options?: CallOptions): Promise<void>;
}

/** DI token for {@link DiskBindingRecords}. */
export const DiskBindingRecords = Symbol.for('confboot.DiskBindingRecords');
