import type {
  CallOptions,
  JoinTicket,
  JoinTicketRequest,
  RejoinTicket,
  RejoinTicketRequest,
} from './types.js';

/** Calls a join service over attested TLS (this node attests itself). */
export interface JoinTicketClient {
  /** Asks the join service at `endpoint` (`host:port`) for a join ticket. */
  issueJoinTicket(endpoint: string, request: JoinTicketRequest, options?: CallOptions): Promise<JoinTicket>;
  /** Asks the join service at `endpoint` for a rejoin ticket. */
  issueRejoinTicket(
    endpoint: string,
    request: RejoinTicketRequest,
    options?: CallOptions,
  ): Promise<RejoinTicket>;
}

/** DI token for {@link JoinTicketClient}. */
export const JoinTicketClient = Symbol.for('confboot.JoinTicketClient');
