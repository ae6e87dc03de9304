/**
 * Join service: the standard gRPC health service `grpc.health.v1.Health` (Check and Watch), hand
 * written so that proto/ stays as it is: the two tiny messages are encoded with
 * @bufbuild/protobuf/wire and the service definition is grpc-js's plain object form.
 * `HealthCheckRequest {string service = 1}`, `HealthCheckResponse {ServingStatus status = 1}`.
 * The empty service name is the whole server; `join.API` is the join service itself.
 */

import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import {
  type handleServerStreamingCall,
  type handleUnaryCall,
  Server,
  ServerCredentials,
  type ServiceDefinition,
  type ServiceError,
  status,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';

/** `grpc.health.v1.HealthCheckResponse.ServingStatus`. */
export const ServingStatus = {
  UNKNOWN: 0,
  SERVING: 1,
  NOT_SERVING: 2,
  /** Watch only: the service is not known (yet). */
  SERVICE_UNKNOWN: 3,
} as const;
/** A ServingStatus value. */
export type ServingStatus = (typeof ServingStatus)[keyof typeof ServingStatus];

/** `grpc.health.v1.HealthCheckRequest`. */
export interface HealthCheckRequest {
  service: string;
}

/** `grpc.health.v1.HealthCheckResponse`. */
export interface HealthCheckResponse {
  status: ServingStatus;
}

/** Encodes a HealthCheckRequest (field 1, string; omitted when empty, as proto3 does). */
export function encodeHealthCheckRequest(req: HealthCheckRequest): Uint8Array {
  const w = new BinaryWriter();
  if (req.service !== '') w.tag(1, WireType.LengthDelimited).string(req.service);
  return w.finish();
}

/** Decodes a HealthCheckRequest; unknown fields are skipped. Throws on malformed bytes. */
export function decodeHealthCheckRequest(bytes: Uint8Array): HealthCheckRequest {
  const r = new BinaryReader(bytes);
  let service = '';
  while (r.pos < r.len) {
    const [field, wireType] = r.tag();
    if (field === 1 && wireType === WireType.LengthDelimited) service = r.string();
    else r.skip(wireType, field);
  }
  return { service };
}

/** Encodes a HealthCheckResponse (field 1, enum; omitted when 0). */
export function encodeHealthCheckResponse(res: HealthCheckResponse): Uint8Array {
  const w = new BinaryWriter();
  if (res.status !== 0) w.tag(1, WireType.Varint).int32(res.status);
  return w.finish();
}

/** Decodes a HealthCheckResponse; unknown fields are skipped. Throws on malformed bytes. */
export function decodeHealthCheckResponse(bytes: Uint8Array): HealthCheckResponse {
  const r = new BinaryReader(bytes);
  let value = 0;
  while (r.pos < r.len) {
    const [field, wireType] = r.tag();
    if (field === 1 && wireType === WireType.Varint) value = r.int32();
    else r.skip(wireType, field);
  }
  return { status: value as ServingStatus };
}

const toBuffer = (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/** grpc-js service definition of `grpc.health.v1.Health`. */
export const HealthServiceDefinition = {
  check: {
    path: '/grpc.health.v1.Health/Check',
    requestStream: false,
    responseStream: false,
    requestSerialize: (v: HealthCheckRequest) => toBuffer(encodeHealthCheckRequest(v)),
    requestDeserialize: (b: Buffer) => decodeHealthCheckRequest(b),
    responseSerialize: (v: HealthCheckResponse) => toBuffer(encodeHealthCheckResponse(v)),
    responseDeserialize: (b: Buffer) => decodeHealthCheckResponse(b),
    originalName: 'Check',
  },
  watch: {
    path: '/grpc.health.v1.Health/Watch',
    requestStream: false,
    responseStream: true,
    requestSerialize: (v: HealthCheckRequest) => toBuffer(encodeHealthCheckRequest(v)),
    requestDeserialize: (b: Buffer) => decodeHealthCheckRequest(b),
    responseSerialize: (v: HealthCheckResponse) => toBuffer(encodeHealthCheckResponse(v)),
    responseDeserialize: (b: Buffer) => decodeHealthCheckResponse(b),
    originalName: 'Watch',
  },
} satisfies ServiceDefinition;

type Watcher = (s: ServingStatus) => void;

/**
 * Serving status per service name plus the grpc-js implementation of Check and Watch. Statuses
 * change with {@link HealthStatus.set}; {@link HealthStatus.shutdown} reports NOT_SERVING
 * everywhere and ends every Watch stream.
 */
export class HealthStatus {
  private readonly statuses = new Map<string, ServingStatus>();
  private readonly watchers = new Map<string, Set<Watcher>>();
  private readonly streams = new Set<() => void>();

  /** `initial` maps service names ('' = the whole server) to their status. */
  constructor(initial: Record<string, ServingStatus> = {}) {
    for (const [k, v] of Object.entries(initial)) this.statuses.set(k, v);
  }

  /** The status of `service`, or undefined when unknown. */
  get(service: string): ServingStatus | undefined {
    return this.statuses.get(service);
  }

  /** Sets the status of `service` and tells its watchers. */
  set(service: string, value: ServingStatus): void {
    if (this.statuses.get(service) === value) return;
    this.statuses.set(service, value);
    for (const w of this.watchers.get(service) ?? []) w(value);
  }

  /** Every known service becomes NOT_SERVING; open Watch streams get that and end. */
  shutdown(): void {
    for (const k of [...this.statuses.keys()]) this.set(k, ServingStatus.NOT_SERVING);
    for (const end of [...this.streams]) end();
  }

  /** The grpc-js implementation to pass to `server.addService(HealthServiceDefinition, …)`. */
  implementation(): UntypedServiceImplementation {
    const check: handleUnaryCall<HealthCheckRequest, HealthCheckResponse> = (call, callback) => {
      const value = this.statuses.get(call.request.service);
      if (value === undefined) {
        const details = `health check: unknown service ${JSON.stringify(call.request.service)}`;
        callback({
          code: status.NOT_FOUND,
          details,
          message: details,
        } as Partial<ServiceError> as ServiceError);
        return;
      }
      callback(null, { status: value });
    };
    const watchHandler: handleServerStreamingCall<HealthCheckRequest, HealthCheckResponse> = (call) => {
      const service = call.request.service;
      const send: Watcher = (s) => {
        if (!call.writableEnded) call.write({ status: s });
      };
      const set = this.watchers.get(service) ?? new Set<Watcher>();
      this.watchers.set(service, set);
      const end = () => {
        set.delete(send);
        this.streams.delete(end);
        if (!call.writableEnded) call.end();
      };
      set.add(send);
      this.streams.add(end);
      call.on('cancelled', end);
      call.on('close', end);
      send(this.statuses.get(service) ?? ServingStatus.SERVICE_UNKNOWN);
    };
    return { check, watch: watchHandler };
  }
}

/**
 * Starts a plain (insecure) gRPC server at `hostPort` that serves only the health service; resolves
 * to the bound port and the server once it listens.
 */
export async function startGrpcHealthServer(
  hostPort: string,
  health: HealthStatus,
): Promise<{ port: number; server: Server }> {
  const server = new Server();
  server.addService(HealthServiceDefinition, health.implementation());
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(hostPort, ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(new Error(`gRPC health listen on ${hostPort}: ${err.message}`)) : resolve(p),
    ),
  );
  return { port, server };
}
