/**
 * KMS port over the key service's gRPC API (upstream `joinservice/internal/kms`): the join service
 * asks the key service for state-disk keys and the measurement secret. Plain insecure gRPC as
 * upstream, or mutual TLS: the client checks the key service's certificate against a CA and
 * presents its own certificate, which the key service checks.
 *
 * Requests go as messages on one open `GetDataKeys` call (src/adapters/kms/data-key-streams.ts says
 * why), opened by the first request and again by the first request after it ended. A key service
 * that answers that call with UNIMPLEMENTED (upstream's has only GetDataKey) is asked with unary
 * GetDataKey calls from then on, the requests waiting on the call included. Each request keeps its
 * own deadline and abort signal; one that gives up leaves the call open for the others.
 */
import { type ClientDuplexStream, credentials, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { APIClient, type DataKeysRequest, type DataKeysResponse } from '../../gen/keyservice.js';
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
  /** Names the operation in every error. */
  readonly #operation: string;
  readonly #defaultTimeoutInMs: number;
  #stream: DataKeyCall | undefined;
  /** The key service answered GetDataKeys with UNIMPLEMENTED: unary calls only. */
  #unaryOnly = false;
  #closed = false;

  constructor(options: GrpcKmsClientOptions) {
    this.#operation = `getting data key from key service ${options.endpoint}`;
    this.#defaultTimeoutInMs = options.defaultTimeoutInMs ?? 30_000;
    // grpc-js reconnects after 1 s, backing off to 120 s; a restarted key service would then stay
    // unreachable for many seconds after it is back (measured: 11 s after a 30 s outage). Join
    // tickets wait on this, so reconnect quickly and cap the backoff low.
    const tls = options.tls;
    const channel = tls
      ? credentials.createSsl(tls.ca, tls.privateKey, tls.certChain)
      : credentials.createInsecure();
    this.#client = new APIClient(options.endpoint, channel, {
      // No channelz registry (grpc-js's default is on): confboot serves none.
      'grpc.enable_channelz': 0,
      'grpc.initial_reconnect_backoff_ms': 250,
      'grpc.max_reconnect_backoff_ms': 2_000,
      ...(tls?.serverName !== undefined ? { 'grpc.ssl_target_name_override': tls.serverName } : {}),
    });
  }

  /** Asks the key service for the key; see {@link KMS.getDataKey} for the error kinds. */
  getDataKey(dataKeyId: string, length: number, options?: CallOptions): Promise<Uint8Array> {
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    const request: KeyRequest = {
      dataKeyId,
      length,
      deadline: Date.now() + (options?.timeoutInMs ?? this.#defaultTimeoutInMs),
      ...(signal ? { signal } : {}),
    };
    if (this.#closed || this.#unaryOnly) return this.#unary(request);
    this.#stream ??= new DataKeyCall(this.#client, this.#operation, (call, moved) => {
      if (this.#stream === call) this.#stream = undefined;
      if (moved === undefined) return;
      this.#unaryOnly = true;
      for (const m of moved) this.#unary(m.request).then(m.resolve, m.reject);
    });
    return this.#stream.request(request);
  }

  /** Ends the open GetDataKeys call (its requests fail with `cancelled`) and closes the channel. */
  close(): void {
    this.#closed = true;
    this.#stream?.cancel();
    this.#stream = undefined;
    this.#client.close();
  }

  #unary(req: KeyRequest): Promise<Uint8Array> {
    const operation = this.#operation;
    const { signal, length } = req;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<Uint8Array>((resolve, reject) => {
      const onAbort = () => call.cancel();
      const call = this.#client.getDataKey(
        { dataKeyId: req.dataKeyId, length },
        new Metadata(),
        { deadline: req.deadline },
        (err, res) => {
          signal?.removeEventListener('abort', onAbort);
          if (err) {
            if (err.code === status.CANCELLED && signal?.aborted) reject(signal.reason);
            else reject(fromGrpcError(err, operation));
            return;
          }
          const checked = checkedKey(res.dataKey, length, operation);
          if (checked instanceof Error) reject(checked);
          else resolve(checked);
        },
      );
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** One data key request as the caller made it. */
interface KeyRequest {
  dataKeyId: string;
  length: number;
  /** Epoch ms. */
  deadline: number;
  signal?: AbortSignal;
}

/** A request waiting on the open call. */
interface Waiting {
  request: KeyRequest;
  resolve: (key: Uint8Array) => void;
  reject: (err: unknown) => void;
}

/** The key as the caller gets it, or the error for an answer of the wrong length. */
function checkedKey(key: Uint8Array, length: number, operation: string): Uint8Array | ConfbootError {
  if (key.length !== length)
    return new ConfbootError('internal', `${operation}: got ${key.length} bytes, asked for ${length}`);
  return new Uint8Array(key);
}

/**
 * One open GetDataKeys call and the requests waiting on it. When the call ends, `ended` is told;
 * with `moved` when the key service does not have the method (those requests are the caller's now),
 * otherwise every waiting request has been failed with the call's status.
 */
class DataKeyCall {
  readonly #call: ClientDuplexStream<DataKeysRequest, DataKeysResponse>;
  readonly #waiting = new Map<number, Waiting & { done: () => void }>();
  #nextId = 1;
  #ended = false;

  constructor(
    client: InstanceType<typeof APIClient>,
    private readonly operation: string,
    private readonly ended: (call: DataKeyCall, moved?: Waiting[]) => void,
  ) {
    this.#call = client.getDataKeys();
    this.#call.on('data', (res: DataKeysResponse) => this.#answered(res));
    this.#call.on('error', (err: ServiceError) => this.#end(err));
    this.#call.on('status', () => this.#end(undefined));
  }

  request(request: KeyRequest): Promise<Uint8Array> {
    return new Promise<Uint8Array>((resolve, reject) => {
      const id = this.#nextId;
      this.#nextId = this.#nextId >= 0xffff_ffff ? 1 : this.#nextId + 1;
      const { signal } = request;
      const onAbort = () => {
        done();
        reject(signal?.reason);
      };
      const timer = setTimeout(
        () => {
          done();
          reject(new ConfbootError('deadline-exceeded', `${this.operation}: Deadline exceeded`));
        },
        Math.max(0, request.deadline - Date.now()),
      );
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.#waiting.delete(id);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#waiting.set(id, { request, resolve, reject, done });
      this.#call.write({ id, dataKeyId: request.dataKeyId, length: request.length });
    });
  }

  cancel(): void {
    this.#call.cancel();
  }

  #answered(res: DataKeysResponse): void {
    const waiting = this.#waiting.get(res.id);
    // A request that gave up (deadline, abort) is no longer waiting; its late answer is dropped.
    if (waiting === undefined) return;
    waiting.done();
    if (res.code !== status.OK) {
      const err = { code: res.code, details: res.message, metadata: new Metadata() } as ServiceError;
      waiting.reject(fromGrpcError(err, this.operation));
      return;
    }
    const checked = checkedKey(res.dataKey, waiting.request.length, this.operation);
    if (checked instanceof Error) waiting.reject(checked);
    else waiting.resolve(checked);
  }

  #end(err: ServiceError | undefined): void {
    if (this.#ended) return;
    this.#ended = true;
    const waiting = [...this.#waiting.values()];
    for (const w of waiting) w.done();
    if (err?.code === status.UNIMPLEMENTED) {
      this.ended(this, waiting);
      return;
    }
    this.ended(this);
    const failure =
      err !== undefined
        ? fromGrpcError(err, this.operation)
        : new ConfbootError('unavailable', `${this.operation}: the key service ended the call`);
    for (const w of waiting) w.reject(failure);
  }
}
