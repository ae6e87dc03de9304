/** A node identity the deny list is asked about; either part may be missing. */
export interface DenyListIdentity {
  /** The node name (from the kubelet CSR), in any spelling; compared after `foldNodeName`. */
  nodeName?: string | undefined;
  /** The state disk UUID, in any case. */
  diskUuid?: string | undefined;
}

/** Why a caller is denied. */
export interface DenyMatch {
  /** Which identity matched. */
  kind: 'node' | 'disk-uuid';
  /** The matched value (a normalised node name or a lower-case disk UUID; neither is secret). */
  value: string;
}

/**
 * Node identities the join service must never give a join or rejoin ticket (per-node revocation):
 * the ticket issuer asks it once it knows who is asking, before any key is requested.
 */
export interface DenyList {
  /** The first match for the node name and/or disk UUID, or undefined. */
  match(identity: DenyListIdentity): DenyMatch | undefined;
  /** Sizes of the current list. */
  readonly size: { nodes: number; diskUuids: number };
}

/** DI token for {@link DenyList}. */
export const DenyList = Symbol.for('confboot.DenyList');

/** A deny list that denies nobody (no list configured). */
export const EMPTY_DENY_LIST: DenyList = Object.freeze({
  match: () => undefined,
  size: Object.freeze({ nodes: 0, diskUuids: 0 }),
});

/** Reason (see ConfbootError.reason) of a refusal because the caller is on the deny list. */
export const DENY_LIST_REASON = 'deny-list';
