/**
 * KMS port over the key service's gRPC API (upstream `joinservice/internal/kms`): the join service
 * asks the key service for state-disk keys and the measurement secret. Plain insecure gRPC as
 * upstream, or mutual TLS: the client checks the key service's certificate against a CA and
 * presents its own certificate, which the key service checks.
 */
import { credentials, Metadata, status } from '@grpc/grpc-js';
import { APIClient } from '../../gen/keyservice.js';
import { ConfbootError } from '../../ports/errors.js';
import type { KMS } from '../../ports/kms.js';
import type { CallOptions } from '../../ports/types.js';
import { fromGrpcError } from '../grpc/status.js';

/** Options of {@link GrpcKmsClient}. */
export interface GrpcKmsClientOptions {
  /** `host:port` of the key service, e.g. `key-service.kube-system:9000`. */
  endpoint: string;
  /** Deadline of one call unless the caller gives `timeoutInMs`; default 30 s (upstream's RPC timeout). */
  defaultTimeoutInMs?: number;
  /** Mutual TLS; absent: plain gRPC. */
  tls?: GrpcKmsClientTls;
}

/** The client's mutual-TLS material, PEM. */
export interface GrpcKmsClientTls {
  /** CA certificates the key service's certificate must chain to (its name must match the endpoint's host). */
  ca: Buffer;
  /** The client's certificate chain (leaf first), presented to the key service. */
  certChain: Buffer;
  /** The client's private key. */
  privateKey: Buffer;
  /** Name the key service's certificate must carry; default the endpoint's host. */
  serverName?: string;
}

/** {@link KMS} backed by a remote key service. Call {@link GrpcKmsClient.close} when done. */
export class GrpcKmsClient implements KMS {
  readonly #client: InstanceType<typeof APIClient>;
  readonly #endpoint: string;
  readonly #defaultTimeoutInMs: number;

  constructor(options: GrpcKmsClientOptions) {
    this.#endpoint = options.endpoint;
    this.#defaultTimeoutInMs = options.defaultTimeoutInMs ?? 30_000;
    // grpc-js reconnects after 1 s, backing off to 120 s; a restarted key service would then stay
    // unreachable for many seconds after it is back (measured: 11 s after a 30 s outage). Join
    // tickets wait on this, so reconnect quickly and cap the backoff low.
    const tls = options.tls;
    const channel = tls
      ? credentials.createSsl(tls.ca, tls.privateKey, tls.certChain)
      : credentials.createInsecure();
    this.#client = new APIClient(options.endpoint, channel, {
      // No channelz registry (grpc-js's default is on): confboot serves none, and the join service
      // makes two calls on this channel per join.
      'grpc.enable_channelz': 0,
      'grpc.initial_reconnect_backoff_ms': 250,
      'grpc.max_reconnect_backoff_ms': 2_000,
      ...(tls?.serverName !== undefined ? { 'grpc.ssl_target_name_override': tls.serverName } : {}),
    });
  }

  /** Asks the key service for the key; see {@link KMS.getDataKey} for the error kinds. */
  getDataKey(dataKeyId: string, length: number, options?: CallOptions): Promise<Uint8Array> {
    const operation = `getting data key from key service ${this.#endpoint}`;
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const deadline = Date.now() + (options?.timeoutInMs ?? this.#defaultTimeoutInMs);
    return new Promise<Uint8Array>((resolve, reject) => {
      const onAbort = () => call.cancel();
      const call = this.#client.getDataKey(
        { dataKeyId, length },
        new Metadata(),
        { deadline },
        (err, res) => {
          signal?.removeEventListener('abort', onAbort);
          if (err) {
            if (err.code === status.CANCELLED && signal?.aborted) reject(signal.reason);
            else reject(fromGrpcError(err, operation));
            return;
          }
          if (res.dataKey.length !== length) {
            reject(
              new ConfbootError(
                'internal',
                `${operation}: got ${res.dataKey.length} bytes, asked for ${length}`,
              ),
            );
            return;
          }
          resolve(new Uint8Array(res.dataKey));
        },
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Closes the channel. */
  close(): void {
    this.#client.close();
  }
}
