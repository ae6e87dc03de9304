/**
 * Why the attested TLS listener dropped a connection before it was attested (adapter layer,
 * src/adapters/grpc/atls): the reasons, as metrics label values, and the error that carries one.
 */
import { ConfbootError, type ConfbootErrorCode } from '../../../ports/errors.js';

/** Why the listener dropped a connection before it was attested (a metrics label value). */
export type DropReason =
  /** The source address already holds the per-source number of unattested connections. */
  | 'source-cap'
  /** The global cap was reached and the new connection's source holds the most connections. */
  | 'global-cap'
  /** Waited the queue timeout after its ClientHello without its handshake starting. */
  | 'queue-timeout'
  /** Closed to make room at the global cap: its source held the most connections. */
  | 'evicted'
  /** No complete first TLS record (the ClientHello) within its deadline. */
  | 'client-hello-timeout'
  /** The TLS handshake did not finish within its deadline. */
  | 'tls-handshake-timeout'
  /** The peer's ATTESTATION frame did not arrive within its deadline (base + size ÷ floor). */
  | 'attestation-timeout'
  /** The peer's VERDICT did not arrive within its deadline. */
  | 'verdict-timeout'
  /** The whole exchange (including verification) exceeded the overall handshake bound. */
  | 'handshake-timeout'
  /** The peer closed the connection before it was attested. */
  | 'peer-closed';

/** Every {@link DropReason}, in a stable order. */
export const DROP_REASONS: readonly DropReason[] = [
  'source-cap',
  'global-cap',
  'queue-timeout',
  'evicted',
  'client-hello-timeout',
  'tls-handshake-timeout',
  'attestation-timeout',
  'verdict-timeout',
  'handshake-timeout',
  'peer-closed',
];

/** A connection dropped by admission: a cap, a phase deadline, or the peer going away. */
export class AdmissionDrop extends ConfbootError {
  override readonly name = 'AdmissionDrop';
  constructor(
    override readonly reason: DropReason,
    message: string,
  ) {
    super(codeOf(reason), message, { reason });
  }
}

function codeOf(reason: DropReason): ConfbootErrorCode {
  if (reason === 'source-cap' || reason === 'global-cap' || reason === 'evicted') return 'resource-exhausted';
  if (reason === 'peer-closed') return 'unavailable';
  return 'deadline-exceeded';
}

/** Type guard for {@link AdmissionDrop}. */
export function isAdmissionDrop(err: unknown): err is AdmissionDrop {
  return err instanceof AdmissionDrop;
}
