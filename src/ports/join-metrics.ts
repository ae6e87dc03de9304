import type { JoinOutcomeReason } from './join-refusal.js';

/** Outcome of one request, as audited and counted. */
export type JoinRequestOutcome = 'issued' | 'refused';

/** The RPCs counted (`attested-tls` = a connection refused before any RPC). */
export type JoinRpc = 'IssueJoinTicket' | 'IssueRejoinTicket' | 'attested-tls';

/** What the join service counts about its calls (Prometheus in production). */
export interface JoinMetrics {
  /**
   * Counts one decided request. Label values come from fixed sets (never caller-chosen text): the
   * reason is `ok` or a JoinRefusalReason.
   */
  countRequest(labels: {
    rpc: JoinRpc;
    outcome: JoinRequestOutcome;
    variant: string;
    reason: JoinOutcomeReason;
  }): void;
  /** Records how long a decided request took. */
  observeSeconds(labels: { rpc: JoinRpc; outcome: JoinRequestOutcome }, seconds: number): void;
  /** One more (+1) or one fewer (-1) request running. */
  running(delta: 1 | -1): void;
}

/** DI token for {@link JoinMetrics}. */
export const JoinMetrics = Symbol.for('confboot.JoinMetrics');
