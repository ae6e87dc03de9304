/**
 * Raw gRPC calls for the RPC fuzz properties: a client with identity (de)serializers, so any bytes
 * can be sent as a request, and every outcome becomes `{code, details, responses}` instead of an
 * exception. Works for unary and server-streaming methods over any channel credentials.
 */
import {
  type CallOptions,
  type ChannelCredentials,
  type Client,
  type ClientOptions,
  type ClientReadableStream,
  Metadata,
  makeGenericClientConstructor,
  type ServiceError,
  status,
} from '@grpc/grpc-js';

/** How a call ended. */
export interface CallOutcome {
  code: status;
  details: string;
  /** Response messages (one for unary OK; any number for streams). */
  responses: Buffer[];
}

const identity = (b: Buffer) => b;

/** A raw client for one method `path` (e.g. `/kms.API/GetDataKey`). */
export class RawGrpcClient {
  private readonly client: Client & Record<string, unknown>;

  constructor(
    address: string,
    creds: ChannelCredentials,
    path: string,
    private readonly streaming = false,
    options: ClientOptions = {},
  ) {
    const Ctor = makeGenericClientConstructor(
      {
        Call: {
          path,
          requestStream: false,
          responseStream: streaming,
          requestSerialize: identity,
          requestDeserialize: identity,
          responseSerialize: identity,
          responseDeserialize: identity,
        },
      },
      'fuzz',
    );
    this.client = new Ctor(address, creds, options) as Client & Record<string, unknown>;
  }

  /** Sends `request` and resolves with the outcome; never rejects. */
  call(request: Uint8Array, deadlineMs = 10_000, metadata = new Metadata()): Promise<CallOutcome> {
    const opts: CallOptions = { deadline: Date.now() + deadlineMs };
    const req = Buffer.from(request);
    const method = this.client.Call as (...args: unknown[]) => unknown;
    if (!this.streaming) {
      return new Promise((resolve) => {
        method.call(this.client, req, metadata, opts, (err: ServiceError | null, res?: Buffer) => {
          if (err) resolve({ code: err.code, details: err.details, responses: [] });
          else resolve({ code: status.OK, details: '', responses: res ? [res] : [] });
        });
      });
    }
    return new Promise((resolve) => {
      const responses: Buffer[] = [];
      const stream = method.call(this.client, req, metadata, opts) as ClientReadableStream<Buffer>;
      stream.on('data', (d: Buffer) => responses.push(d));
      stream.on('error', (err: ServiceError) => resolve({ code: err.code, details: err.details, responses }));
      stream.on('end', () => resolve({ code: status.OK, details: '', responses }));
    });
  }

  /** Closes the channel. */
  close(): void {
    this.client.close();
  }
}

/** Name of a status code for messages. */
export function statusName(code: status): string {
  return status[code] ?? String(code);
}
