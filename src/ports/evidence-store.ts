/** What the join service decided on for one node: the evidence, the outcome and why. */
export interface EvidenceRecord {
  /**
   * Whose record this is: `disk/<uuid>` for an issued ticket (join and rejoin of one node share it),
   * `refused-disk/<uuid>` for a refused ticket request, `address/<ip>` for evidence refused before
   * the request named a disk ({@link ticketEvidenceKey}).
   */
  key: string;
  /** Node name from the kubelet CSR, when a join named it (kept across a later rejoin). */
  nodeName?: string;
  /** Caller address as seen by the join service. */
  peer: string;
  /** Attestation variant the evidence was checked as. */
  variant: string;
  oid: string;
  /** The attestation document as received. */
  document: Uint8Array;
  /** The TLS-exporter nonce the document had to bind. */
  nonce: Uint8Array;
  /** SHA-256 of the caller's TLS SPKI the document committed to, when it was verified. */
  userData?: Uint8Array;
  /** `IssueJoinTicket`, `IssueRejoinTicket` or `attested-tls` (refused during the handshake). */
  rpc: string;
  outcome: 'issued' | 'refused';
  /** `ok`, or the reason of the refusal (failed check or error kind). */
  reason: string;
  /** When the decision was made (ISO 8601). */
  at: string;
  /** The measurement set the attestation matched, when the attestation config names sets. */
  measurementSet?: string;
  /** The `kid` of the key that signed the issued ticket's receipt, when one was signed. */
  receiptKid?: string;
  /** The receipt's overall EAR status (the worst of its appraisals), when one was signed. */
  receiptStatus?: string;
}

/**
 * The key of a ticket request's record. Issued and refused requests have keys of their own, so a
 * refused request that names another node's disk UUID never replaces (or takes the node name of)
 * the record of the ticket that disk's owner was issued.
 */
export function ticketEvidenceKey(diskUuid: string, outcome: EvidenceRecord['outcome']): string {
  return `${outcome === 'issued' ? 'disk' : 'refused-disk'}/${diskUuid.toLowerCase()}`;
}

/** Bounded, persistent record of the evidence behind each ticket decision, latest per node. */
export interface EvidenceStore {
  /**
   * Records a decision, replacing the previous record of the same key. Never rejects: a record
   * that cannot be kept is dropped (and logged by the implementation).
   */
  record(record: EvidenceRecord): Promise<void>;
  /** Every record kept, oldest first. */
  list(): Promise<EvidenceRecord[]>;
}

/** DI token for {@link EvidenceStore}. */
export const EvidenceStore = Symbol.for('confboot.EvidenceStore');
