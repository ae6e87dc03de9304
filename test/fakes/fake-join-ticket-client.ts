/**
 * JoinTicketClient that calls an in-process handler per endpoint, with scripted failures; the network
 * and attested TLS are simulated (the gRPC adapter has its own tests on real sockets).
 */
import type { JoinTicketClient } from '../../src/ports/join-ticket-client.js';
import type {
  JoinTicket,
  JoinTicketRequest,
  RejoinTicket,
  RejoinTicketRequest,
} from '../../src/ports/types.js';

export type JoinHandler = (endpoint: string, request: JoinTicketRequest) => Promise<JoinTicket>;

export class FakeJoinTicketClient implements JoinTicketClient {
  readonly calls: Array<{ endpoint: string; request: JoinTicketRequest }> = [];
  readonly rejoinCalls: Array<{ endpoint: string; request: RejoinTicketRequest }> = [];
  /** Errors thrown by the next calls, in order, before the handler is used. */
  readonly failures: Error[] = [];

  constructor(
    private readonly handler: JoinHandler,
    private readonly rejoinHandler?: (
      endpoint: string,
      request: RejoinTicketRequest,
    ) => Promise<RejoinTicket>,
  ) {}

  async issueJoinTicket(endpoint: string, request: JoinTicketRequest): Promise<JoinTicket> {
    this.calls.push({ endpoint, request });
    const f = this.failures.shift();
    if (f) throw f;
    return this.handler(endpoint, request);
  }

  async issueRejoinTicket(endpoint: string, request: RejoinTicketRequest): Promise<RejoinTicket> {
    this.rejoinCalls.push({ endpoint, request });
    const f = this.failures.shift();
    if (f) throw f;
    if (!this.rejoinHandler) throw new Error(`no rejoin handler for ${endpoint}`);
    return this.rejoinHandler(endpoint, request);
  }
}
