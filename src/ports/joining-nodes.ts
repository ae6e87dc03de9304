import type { CallOptions } from './types.js';

/**
 * What a join ticket lets the node's kubelet ask for: its TLS-bootstrap CSR must come from the
 * ticket's bootstrap token and carry the key of the ticket's kubelet CSR. Neither value is secret
 * (the token's ID is its public half).
 */
export interface KubeletCredentialsGrant {
  /** The ID (the part before the dot) of the bootstrap token the ticket carries. */
  bootstrapTokenId: string;
  /** Lower-case hex SHA-256 of the SubjectPublicKeyInfo (DER) of the ticket's kubelet key. */
  kubeletKeySha256: string;
}

/** One JoiningNode record: a node that received a join ticket and is not yet in the cluster. */
export interface JoiningNodeRecord {
  /** The record's own name (`control-plane` for a control plane, else the node name). */
  objectName: string;
  /** The node's name (normalised like a kubelet CSR's node name). */
  nodeName: string;
  isControlPlane: boolean;
  /** After this the node is given up on and the record removed. */
  deadline: Date;
  /** When the API server created the record (`metadata.creationTimestamp`), when known. */
  createdAt?: Date;
  /** The ticket's kubelet credentials; absent on a record written without them. */
  grant?: KubeletCredentialsGrant;
}

/** The JoiningNode records as the node operator sees them. */
export interface JoiningNodes {
  /** Every record. Rejects (usually `unavailable`) when they cannot be read. */
  list(options?: CallOptions): Promise<JoiningNodeRecord[]>;
  /** Removes record `objectName`; resolves also when it is already gone. */
  delete(objectName: string, options?: CallOptions): Promise<void>;
}

/** DI token for {@link JoiningNodes}. */
export const JoiningNodes = Symbol.for('confboot.JoiningNodes');
