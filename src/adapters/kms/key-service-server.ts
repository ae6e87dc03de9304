/**
 * The key service's gRPC edge (upstream `keyservice/internal/server`): `kms.API` (upstream's
 * GetDataKey, and GetDataKeys, many requests on one call: data-key-streams.ts) on plain insecure
 * gRPC as upstream, or with mutual TLS: the service then speaks only to clients whose certificate
 * chains to the configured client CA, and a client without one is refused in the handshake. Both
 * methods answer a request through data-key-answer.ts: checked as upstream checks it, error kinds
 * mapped through the gRPC edge's one status table (src/adapters/grpc/status.ts).
 *
 * Without TLS, whoever reaches the port can fetch any data key, which includes the measurement
 * secret and every node's state-disk key.
 */
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { type APIServer, APIService } from '../../gen/keyservice.js';
import { messageOf } from '../../ports/errors.js';
import type { KMS } from '../../ports/kms.js';
import type { Logger } from '../../ports/logger.js';
import { joinHostPort } from '../../ports/peer-address.js';
import { answerDataKeyRequest } from './data-key-answer.js';
import { DataKeyStreams } from './data-key-streams.js';

/** Options of {@link startKeyServiceServer}. */
export interface KeyServiceServerOptions {
  /** Where keys come from, usually an {@link HkdfKms}. */
  kms: KMS;
  /** Address to bind, e.g. `0.0.0.0` or `127.0.0.1`. */
  host: string;
  /** Port to bind; 0 picks a free one (see {@link KeyServiceServer.port}). */
  port: number;
  logger: Logger;
  /** How long shutdown waits for running calls before cancelling them; default 5 s. */
  shutdownGraceInMs?: number;
  /** Mutual TLS; absent: plain gRPC without authentication. */
  tls?: KeyServiceServerTls;
}

/** The key service's mutual-TLS material, PEM. */
export interface KeyServiceServerTls {
  /** The server's certificate chain (leaf first). */
  certChain: Buffer;
  /** The server's private key. */
  privateKey: Buffer;
  /** CA certificates a client certificate must chain to; clients without one are refused. */
  clientCa: Buffer;
}

/** A running key service. */
export interface KeyServiceServer {
  /** The bound port. */
  readonly port: number;
  /** Stops accepting calls, lets running calls finish within the grace period, then forces. */
  shutdown(): Promise<void>;
}

/**
 * Builds the `kms.API` handlers over `kms`. Exposed for servers that host several services; call
 * `closeStreams` when such a server shuts down, or its open GetDataKeys calls hold it until its grace
 * period ends.
 */
export function keyServiceHandlers(
  kms: KMS,
  logger: Logger,
): {
  handlers: Pick<APIServer, 'getDataKey' | 'getDataKeys'>;
  closeStreams: () => void;
} {
  const streams = new DataKeyStreams(kms, logger);
  const handlers: Pick<APIServer, 'getDataKey' | 'getDataKeys'> = {
    getDataKeys: streams.handle,
    getDataKey: (call, callback) => {
      const { dataKeyId, length } = call.request;
      answerDataKeyRequest(kms, logger.child({ peer: call.getPeer() }), dataKeyId, length).then((answer) =>
        'key' in answer ? callback(null, { dataKey: Buffer.from(answer.key) }) : callback(answer.refusal),
      );
    },
  };
  return { handlers, closeStreams: () => streams.close() };
}

/**
 * Starts the key service on `host:port` and resolves once it is bound.
 * @throws when the address cannot be bound (the message names it).
 */
export async function startKeyServiceServer(options: KeyServiceServerOptions): Promise<KeyServiceServer> {
  const { kms, host, logger } = options;
  const graceMs = options.shutdownGraceInMs ?? 5_000;
  const server = new Server();
  const { handlers, closeStreams } = keyServiceHandlers(kms, logger);
  server.addService(APIService, handlers);
  const address = joinHostPort(host, options.port);
  const tls = options.tls;
  let credentials: ServerCredentials;
  try {
    credentials = tls
      ? ServerCredentials.createSsl(
          tls.clientCa,
          [{ cert_chain: tls.certChain, private_key: tls.privateKey }],
          true,
        )
      : ServerCredentials.createInsecure();
  } catch (err) {
    throw new Error(`key service TLS: ${messageOf(err)}`, { cause: err });
  }
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, credentials, (err, bound) => {
      if (err) reject(new Error(`binding key service to ${address}: ${err.message}`, { cause: err }));
      else resolve(bound);
    });
  });
  let stopped: Promise<void> | undefined;
  return {
    port,
    shutdown() {
      stopped ??= new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          logger.warn('Key service calls still running after grace period, cancelling them', { graceMs });
          server.forceShutdown();
          resolve();
        }, graceMs);
        server.tryShutdown(() => {
          clearTimeout(force);
          resolve();
        });
        closeStreams();
      });
      return stopped;
    },
  };
}
