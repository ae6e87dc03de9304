/**
 * Client side of attested TLS for grpc-js (adapter layer, src/adapters/grpc/atls): channel
 * credentials whose secure connector runs its own TLS 1.3 handshake and the attestation exchange on
 * the TCP socket grpc-js opened, and gives grpc-js the socket only after both verdicts accepted.
 * Relies on grpc-js's internal `_createSecureConnector` (see grpc-hook.ts and docs/atls.md).
 */
import type { Socket } from 'node:net';
import { CallCredentials, ChannelCredentials } from '@grpc/grpc-js';
import { attestSocket } from './connection.js';
import type { AtlsOptions, AttestedPeer } from './exchange.js';
import { assertGrpcJsInternals } from './grpc-hook.js';

type CreateSecureConnector = ChannelCredentials['_createSecureConnector'];
/** grpc-js's SecureConnector, taken from the abstract method's signature (not exported by grpc-js). */
export type SecureConnector = ReturnType<CreateSecureConnector>;

/** Options of {@link AttestedChannelCredentials}. */
export interface AtlsCredentialsOptions extends AtlsOptions {
  /** Called with each attested connection (peer address and validated attestation). */
  onAttested?: (peer: AttestedPeer) => void;
  /** Called with each failed attempt's reason. */
  onRefused?: (reason: Error) => void;
}

/**
 * grpc-js channel credentials for attested TLS. With `issuer`, this client attests itself (join);
 * with `validators`, it verifies the server (init); with both, mutual. Every connection gets a
 * fresh certificate and nonce. `lastError`/`lastPeer` expose the outcome of the latest attempt.
 */
export class AttestedChannelCredentials extends ChannelCredentials {
  private readonly options: AtlsCredentialsOptions;
  /** Reason the latest connection attempt failed, if it did. */
  lastError: Error | undefined;
  /** The latest attested server connection. */
  lastPeer: AttestedPeer | undefined;

  constructor(options: AtlsCredentialsOptions) {
    assertGrpcJsInternals();
    super();
    this.options = options;
  }

  /** grpc-js: this channel is secure. */
  _isSecure(): boolean {
    return true;
  }

  /** grpc-js: credentials are equal only to themselves (no subchannel sharing between instances). */
  _equals(other: ChannelCredentials): boolean {
    return other === this;
  }

  /** grpc-js (internal since 1.13): the connector that secures each new TCP connection. */
  _createSecureConnector(
    _channelTarget: Parameters<CreateSecureConnector>[0],
    _options: Parameters<CreateSecureConnector>[1],
    callCredentials?: CallCredentials,
  ): SecureConnector {
    const credentials = callCredentials ?? CallCredentials.createEmpty();
    return {
      connect: (socket: Socket) => this.connectAttested(socket),
      waitForReady: () => Promise.resolve(),
      getCallCredentials: () => credentials,
      destroy: () => {},
    };
  }

  private async connectAttested(raw: Socket): Promise<{ socket: Socket; secure: boolean }> {
    try {
      const { socket, peer } = await attestSocket(raw, 'client', this.options);
      this.lastError = undefined;
      this.lastPeer = peer;
      this.options.onAttested?.(peer);
      return { socket, secure: true };
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      this.lastError = error;
      this.options.onRefused?.(error);
      throw error;
    }
  }
}
