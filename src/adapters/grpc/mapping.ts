/**
 * Proto ⇄ domain mapping at the gRPC edge (adapter layer, src/adapters/grpc): ts-proto messages
 * (src/gen, `Buffer` fields) to the plain port types (src/ports/types.ts, `Uint8Array` fields) and
 * back, for join, rejoin and init. Byte fields are re-viewed, not copied.
 */
import type { Component as ProtoComponent } from '../../gen/components.js';
import type {
  InitSuccessResponse,
  InitRequest as ProtoInitRequest,
  InitResponse as ProtoInitResponse,
} from '../../gen/init.js';
import type {
  IssueJoinTicketRequest,
  IssueJoinTicketResponse,
  IssueRejoinTicketRequest,
  IssueRejoinTicketResponse,
} from '../../gen/join.js';
import type {
  Component,
  InitRequest,
  InitResult,
  JoinTicket,
  JoinTicketRequest,
  RejoinTicket,
  RejoinTicketRequest,
} from '../../ports/types.js';

/** Views a Uint8Array as a Buffer without copying. */
export function toBuffer(bytes: Uint8Array | undefined): Buffer {
  if (bytes === undefined) return Buffer.alloc(0);
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Views a Buffer as a plain Uint8Array without copying. */
export function toBytes(buf: Uint8Array | undefined): Uint8Array {
  if (buf === undefined) return new Uint8Array(0);
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

function componentToProto(c: Component): ProtoComponent {
  return { url: c.url, hash: c.hash, installPath: c.installPath, extract: c.extract };
}

function componentFromProto(c: ProtoComponent): Component {
  return { url: c.url, hash: c.hash, installPath: c.installPath, extract: c.extract };
}

/** Domain join request → proto. */
export function joinRequestToProto(r: JoinTicketRequest): IssueJoinTicketRequest {
  return {
    diskUuid: r.diskUuid,
    certificateRequest: toBuffer(r.certificateRequest),
    isControlPlane: r.isControlPlane,
    hostPublicKey: toBuffer(r.hostPublicKey),
    hostCertificatePrincipals: [...r.hostCertificatePrincipals],
  };
}

/** Proto join request → domain. */
export function joinRequestFromProto(p: IssueJoinTicketRequest): JoinTicketRequest {
  return {
    diskUuid: p.diskUuid,
    certificateRequest: toBytes(p.certificateRequest),
    isControlPlane: p.isControlPlane,
    hostPublicKey: toBytes(p.hostPublicKey),
    hostCertificatePrincipals: [...p.hostCertificatePrincipals],
  };
}

/** Domain join ticket → proto. */
export function joinTicketToProto(t: JoinTicket): IssueJoinTicketResponse {
  return {
    stateDiskKey: toBuffer(t.stateDiskKey),
    measurementSalt: toBuffer(t.measurementSalt),
    measurementSecret: toBuffer(t.measurementSecret),
    kubeletCert: toBuffer(t.kubeletCert),
    apiServerEndpoint: t.apiServerEndpoint,
    token: t.token,
    discoveryTokenCaCertHash: t.discoveryTokenCaCertHash,
    controlPlaneFiles: t.controlPlaneFiles.map((f) => ({ name: f.name, data: toBuffer(f.data) })),
    kubernetesVersion: t.kubernetesVersion,
    kubernetesComponents: t.kubernetesComponents.map(componentToProto),
    authorizedCaPublicKey: toBuffer(t.authorizedCaPublicKey),
    hostCertificate: toBuffer(t.hostCertificate),
    receipt: t.receipt ?? '',
  };
}

/** Proto join ticket → domain. */
export function joinTicketFromProto(p: IssueJoinTicketResponse): JoinTicket {
  return {
    stateDiskKey: toBytes(p.stateDiskKey),
    measurementSalt: toBytes(p.measurementSalt),
    measurementSecret: toBytes(p.measurementSecret),
    kubeletCert: toBytes(p.kubeletCert),
    apiServerEndpoint: p.apiServerEndpoint,
    token: p.token,
    discoveryTokenCaCertHash: p.discoveryTokenCaCertHash,
    controlPlaneFiles: p.controlPlaneFiles.map((f) => ({ name: f.name, data: toBytes(f.data) })),
    kubernetesVersion: p.kubernetesVersion,
    kubernetesComponents: p.kubernetesComponents.map(componentFromProto),
    authorizedCaPublicKey: toBytes(p.authorizedCaPublicKey),
    hostCertificate: toBytes(p.hostCertificate),
    ...(p.receipt !== '' ? { receipt: p.receipt } : {}),
  };
}

/** Domain rejoin request → proto. */
export function rejoinRequestToProto(r: RejoinTicketRequest): IssueRejoinTicketRequest {
  return { diskUuid: r.diskUuid };
}

/** Proto rejoin request → domain. */
export function rejoinRequestFromProto(p: IssueRejoinTicketRequest): RejoinTicketRequest {
  return { diskUuid: p.diskUuid };
}

/** Domain rejoin ticket → proto. */
export function rejoinTicketToProto(t: RejoinTicket): IssueRejoinTicketResponse {
  return {
    stateDiskKey: toBuffer(t.stateDiskKey),
    measurementSecret: toBuffer(t.measurementSecret),
    receipt: t.receipt ?? '',
  };
}

/** Proto rejoin ticket → domain. */
export function rejoinTicketFromProto(p: IssueRejoinTicketResponse): RejoinTicket {
  return {
    stateDiskKey: toBytes(p.stateDiskKey),
    measurementSecret: toBytes(p.measurementSecret),
    ...(p.receipt !== '' ? { receipt: p.receipt } : {}),
  };
}

/** Domain init request → proto. */
export function initRequestToProto(r: InitRequest): ProtoInitRequest {
  return {
    kmsUri: r.kmsUri,
    storageUri: r.storageUri,
    measurementSalt: toBuffer(r.measurementSalt),
    kubernetesVersion: r.kubernetesVersion,
    conformanceMode: r.conformanceMode,
    kubernetesComponents: r.kubernetesComponents.map(componentToProto),
    initSecret: toBuffer(r.initSecret),
    clusterName: r.clusterName,
    apiserverCertSans: [...r.apiserverCertSans],
    serviceCidr: r.serviceCidr,
  };
}

/** Proto init request → domain. */
export function initRequestFromProto(p: ProtoInitRequest): InitRequest {
  return {
    kmsUri: p.kmsUri,
    storageUri: p.storageUri,
    measurementSalt: toBytes(p.measurementSalt),
    kubernetesVersion: p.kubernetesVersion,
    conformanceMode: p.conformanceMode,
    kubernetesComponents: p.kubernetesComponents.map(componentFromProto),
    initSecret: toBytes(p.initSecret),
    clusterName: p.clusterName,
    apiserverCertSans: [...p.apiserverCertSans],
    serviceCidr: p.serviceCidr,
  };
}

/** Domain init result → proto success message (owner_id is never set, as upstream). */
export function initResultToProto(r: InitResult): InitSuccessResponse {
  return { kubeconfig: toBuffer(r.kubeconfig), ownerId: Buffer.alloc(0), clusterId: toBuffer(r.clusterId) };
}

/** Proto success message → domain init result. */
export function initResultFromProto(p: InitSuccessResponse): InitResult {
  return { kubeconfig: toBytes(p.kubeconfig), clusterId: toBytes(p.clusterId) };
}

/** One event of the Init stream, in domain terms. */
export type InitStreamEvent =
  /** The cluster was initialised; ends the stream. */
  | { kind: 'success'; result: InitResult }
  /** Init failed; log chunks follow. */
  | { kind: 'failure'; error: string }
  /** A chunk of the node's log. */
  | { kind: 'log'; chunk: Uint8Array };

/** Domain stream event → proto InitResponse. */
export function initEventToProto(e: InitStreamEvent): ProtoInitResponse {
  switch (e.kind) {
    case 'success':
      return { initSuccess: initResultToProto(e.result) };
    case 'failure':
      return { initFailure: { error: e.error } };
    case 'log':
      return { log: { log: toBuffer(e.chunk) } };
  }
}

/** Proto InitResponse → domain stream event; undefined for an empty oneof. */
export function initEventFromProto(p: ProtoInitResponse): InitStreamEvent | undefined {
  if (p.initSuccess) return { kind: 'success', result: initResultFromProto(p.initSuccess) };
  if (p.initFailure) return { kind: 'failure', error: p.initFailure.error };
  if (p.log) return { kind: 'log', chunk: toBytes(p.log.log) };
  return undefined;
}
