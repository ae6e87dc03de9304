/**
 * Client side of attested TLS for grpc-js (adapter layer, src/adapters/grpc/atls): channel
 * credentials whose secure connector runs its own TLS 1.3 handshake and the attestation exchange on
 * the TCP socket grpc-js opened, and gives grpc-js the socket only after both verdicts accepted.
 * Relies on grpc-js's internal `_createSecureConnector` (see grpc-hook.ts and docs/atls.md).
 *
 * Two additions for one-shot callers such as the join client: `finish()` (and grpc-js destroying
 * the connector when the channel closes) stops every further connection, because after a refused
 * connection grpc-js would otherwise reconnect in the background — a second TPM quote and a second
 * audit event for one call; and `localAddress` makes connections leave from a given local address
 * (a loopback node's own 127.0.0.x), through a resolver scheme registered here that hands grpc-js
 * addresses carrying `localAddress` for its `net.connect`.
 */
import { isIP, type Socket } from 'node:net';
import {
  CallCredentials,
  ChannelCredentials,
  type ChannelOptions,
  experimental,
  status,
} from '@grpc/grpc-js';
import { ClientDeadline, type ClientDeadlines } from './client-deadline.js';
import { attestSocket } from './connection.js';
import type { AtlsOptions } from './exchange.js';
import { assertGrpcJsInternals } from './grpc-hook.js';
import { processTlsIdentity, type RotatingTlsIdentity } from './identity-pool.js';
import type { AttestedPeer } from './peer-attestation.js';

type CreateSecureConnector = ChannelCredentials['_createSecureConnector'];
/** grpc-js's SecureConnector, taken from the abstract method's signature (not exported by grpc-js). */
export type SecureConnector = ReturnType<CreateSecureConnector>;

/** Options of {@link AttestedChannelCredentials}. */
export interface AtlsCredentialsOptions extends AtlsOptions, ClientDeadlines {
  /**
   * One connection per channel: after a failed attempt no further connection is made (as after
   * {@link AttestedChannelCredentials.finish}), so grpc-js does not reconnect in the background.
   */
  oneAttempt?: boolean;
  /**
   * Local address every connection leaves from (IPv4 or IPv6 literal). The channel must be created
   * with {@link AttestedChannelCredentials.target}; a connection from any other address is refused.
   */
  localAddress?: string;
  /**
   * The TLS identity every connection presents (rotated on schedule and on clock jumps). Default:
   * the process's identity for `clock` (identity-pool.ts).
   */
  identities?: RotatingTlsIdentity;
}

/** How one connection attempt ended: attested (with the server), or failed with its reason. */
export type ConnectOutcome = { attested: true; peer: AttestedPeer } | { attested: false; error: Error };

/** Resolver scheme of targets bound to a local address: `confboot-bound://<local address>/<host:port>`. */
export const BOUND_TARGET_SCHEME = 'confboot-bound';

type Resolver = experimental.Resolver;
type ResolverListener = experimental.ResolverListener;
type GrpcUri = experimental.GrpcUri;

/**
 * Resolves `confboot-bound://<local>/<host:port>` with grpc-js's DNS resolver for `host:port` and
 * adds `localAddress: <local>` to every TCP address of the local address's family.
 */
class BoundResolver implements Resolver {
  private readonly inner: Resolver;

  constructor(target: GrpcUri, listener: ResolverListener, options: ChannelOptions) {
    const local = target.authority ?? '';
    const family = isIP(local);
    const bind: ResolverListener = (endpoints, attributes, serviceConfig, note) => {
      if (!endpoints.ok) return listener(endpoints, attributes, serviceConfig, note);
      const bound = endpoints.value
        .map((e) => ({
          ...e,
          addresses: e.addresses
            .filter((a) => 'host' in a && isIP(a.host) === family)
            .map((a) => ({ ...a, localAddress: local })),
        }))
        .filter((e) => e.addresses.length > 0);
      if (bound.length === 0)
        return listener(
          experimental.statusOrFromError({
            code: status.UNAVAILABLE,
            details: `${target.path} has no IPv${family} address to reach from local address ${local}`,
          }),
          attributes,
          serviceConfig,
          note,
        );
      return listener(experimental.statusOrFromValue(bound), attributes, serviceConfig, note);
    };
    this.inner = experimental.createResolver({ scheme: 'dns', path: target.path }, bind, options);
  }

  updateResolution(): void {
    this.inner.updateResolution();
  }

  destroy(): void {
    this.inner.destroy();
  }

  static getDefaultAuthority(target: GrpcUri): string {
    return target.path;
  }
}

let boundSchemeRegistered = false;

/** Strips an IPv4-mapped IPv6 prefix, so `::ffff:127.0.0.5` compares equal to `127.0.0.5`. */
function plainAddress(address: string | undefined): string | undefined {
  return address?.startsWith('::ffff:') && isIP(address.slice(7)) === 4 ? address.slice(7) : address;
}

/**
 * grpc-js channel credentials for attested TLS. With `issuer`, this client attests itself (join);
 * with `validators`, it verifies the server (init); with both, mutual. Every connection presents
 * the process's current TLS identity and gets a fresh nonce (the TLS exporter of its own session).
 * Each attempt ends in a {@link ConnectOutcome} value ({@link outcome}); {@link answered} settles
 * once a server has answered on any connection.
 */
export class AttestedChannelCredentials extends ChannelCredentials {
  private readonly options: AtlsCredentialsOptions;
  private latest: ConnectOutcome | undefined;
  private latestAttested: AttestedPeer | undefined;
  private markAnswered: () => void = () => {};
  /**
   * Resolves once a server has answered on a connection of this channel: it finished the TLS
   * handshake and sent its first attested TLS frame (it may still be verifying this client), or
   * the connection was attested.
   */
  readonly answered: Promise<void> = new Promise((resolve) => {
    this.markAnswered = resolve;
  });

  private finished = false;

  /** Throws when `localAddress` is set but is not an IP literal. */
  constructor(options: AtlsCredentialsOptions) {
    assertGrpcJsInternals();
    super();
    if (options.localAddress !== undefined && isIP(options.localAddress) === 0)
      throw new Error(
        `attested TLS: local address ${JSON.stringify(options.localAddress)} is not an IP address`,
      );
    this.options = options;
  }

  /**
   * The grpc-js target for `endpoint` (`host:port`): unchanged without `localAddress`, otherwise a
   * {@link BOUND_TARGET_SCHEME} target whose connections leave from the local address.
   */
  target(endpoint: string): string {
    const local = this.options.localAddress;
    if (local === undefined) return endpoint;
    if (!boundSchemeRegistered) {
      experimental.registerResolver(BOUND_TARGET_SCHEME, BoundResolver);
      boundSchemeRegistered = true;
    }
    return `${BOUND_TARGET_SCHEME}://${local}/${endpoint}`;
  }

  /**
   * No new connections from now on: grpc-js's next attempt fails before it opens a TCP connection.
   * Call it when the call this channel was made for has finished. Connections already open stay.
   */
  finish(): void {
    this.finished = true;
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
    // grpc-js destroys the connector when the channel lets go of the subchannel (client.close()),
    // but may still reconnect afterwards; a destroyed connector refuses.
    let destroyed = false;
    const stopped = () =>
      destroyed || this.finished
        ? new Error('attested TLS: the call this channel was made for has finished; not reconnecting')
        : undefined;
    return {
      connect: (socket: Socket) => {
        const stop = stopped();
        if (stop) {
          socket.destroy();
          return Promise.reject(stop);
        }
        return this.connectAttested(socket);
      },
      waitForReady: () => {
        const stop = stopped();
        return stop ? Promise.reject(stop) : Promise.resolve();
      },
      getCallCredentials: () => credentials,
      destroy: () => {
        destroyed = true;
      },
    };
  }

  private async connectAttested(raw: Socket): Promise<{ socket: Socket; secure: boolean }> {
    try {
      const local = this.options.localAddress;
      const from = raw.localAddress;
      if (local !== undefined && plainAddress(from) !== plainAddress(local)) {
        raw.destroy();
        throw new Error(
          `attested TLS: connection left from ${from ?? 'an unknown address'}, not from local address ${local} (create the channel with credentials.target(endpoint))`,
        );
      }
      const budget = new ClientDeadline(this.options);
      void budget.answered.then(this.markAnswered);
      const { socket, peer } = await attestSocket(raw, 'client', this.options, {
        budget,
        identity: await (this.options.identities ?? processTlsIdentity(this.options.clock, 'client')).get(),
      });
      this.latest = { attested: true, peer };
      this.latestAttested = peer;
      this.markAnswered();
      return { socket, secure: true };
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err));
      this.latest = { attested: false, error };
      if (this.options.oneAttempt === true) this.finish();
      throw error;
    }
  }

  /** How the latest connection attempt that has ended ended; undefined before any has. */
  outcome(): ConnectOutcome | undefined {
    return this.latest;
  }

  /** The server of the latest attested connection, if one was attested. */
  attestedPeer(): AttestedPeer | undefined {
    return this.latestAttested;
  }

  /** The reason the latest attempt failed, if it failed. */
  refusal(): Error | undefined {
    const latest = this.outcome();
    return latest?.attested === false ? latest.error : undefined;
  }
}
