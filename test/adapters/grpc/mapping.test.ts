/** Proto ⇄ domain mapping for join, rejoin and init, through real protobuf encoding. */
import { describe, expect, it } from 'vitest';
import {
  initEventFromProto,
  initEventToProto,
  initRequestFromProto,
  initRequestToProto,
  joinRequestFromProto,
  joinRequestToProto,
  joinTicketFromProto,
  joinTicketToProto,
  rejoinRequestFromProto,
  rejoinRequestToProto,
  rejoinTicketFromProto,
  rejoinTicketToProto,
} from '../../../src/adapters/grpc/mapping.js';
import { InitResponse, InitRequest as ProtoInitRequest } from '../../../src/gen/init.js';
import {
  IssueJoinTicketRequest,
  IssueJoinTicketResponse,
  IssueRejoinTicketRequest,
  IssueRejoinTicketResponse,
} from '../../../src/gen/join.js';
import type { InitRequest, JoinTicketRequest } from '../../../src/ports/types.js';
import { sampleTicket } from './helpers.js';

/** Compares byte fields as plain arrays so Buffer vs Uint8Array does not matter. */
function plain(v: unknown): unknown {
  if (v instanceof Uint8Array) return Array.from(v);
  if (Array.isArray(v)) return v.map(plain);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
  return v;
}

describe('join mapping', () => {
  it('request survives domain → proto bytes → domain', () => {
    const req: JoinTicketRequest = {
      diskUuid: 'C0FFEE00-0000-4000-8000-000000000001',
      certificateRequest: new Uint8Array([0x30, 0x82, 1, 2]),
      isControlPlane: true,
      hostPublicKey: new Uint8Array([0, 0, 0, 11]),
      hostCertificatePrincipals: ['10.0.0.5', 'node-1'],
    };
    const wire = IssueJoinTicketRequest.encode(joinRequestToProto(req)).finish();
    const back = joinRequestFromProto(IssueJoinTicketRequest.decode(wire));
    expect(plain(back)).toEqual(plain(req));
    expect(back.certificateRequest).toBeInstanceOf(Uint8Array);
  });

  it('ticket survives domain → proto bytes → domain, every field', () => {
    const t = sampleTicket();
    const wire = IssueJoinTicketResponse.encode(joinTicketToProto(t)).finish();
    expect(plain(joinTicketFromProto(IssueJoinTicketResponse.decode(wire)))).toEqual(plain(t));
  });

  it('rejoin request and ticket survive', () => {
    const req = { diskUuid: 'abc' };
    expect(
      rejoinRequestFromProto(
        IssueRejoinTicketRequest.decode(IssueRejoinTicketRequest.encode(rejoinRequestToProto(req)).finish()),
      ),
    ).toEqual(req);
    const t = { stateDiskKey: new Uint8Array(32).fill(9), measurementSecret: new Uint8Array(32).fill(8) };
    const wire = IssueRejoinTicketResponse.encode(rejoinTicketToProto(t)).finish();
    expect(plain(rejoinTicketFromProto(IssueRejoinTicketResponse.decode(wire)))).toEqual(plain(t));
  });
});

describe('init mapping', () => {
  it('request survives', () => {
    const req: InitRequest = {
      kmsUri: 'kms://cluster-kms?key=AAAA&salt=BBBB',
      storageUri: 'storage://no-store',
      measurementSalt: new Uint8Array(32).fill(3),
      kubernetesVersion: 'v1.31.1',
      conformanceMode: true,
      kubernetesComponents: [
        { url: 'https://a/b', hash: 'sha256:ff', installPath: '/usr/bin/b', extract: false },
      ],
      initSecret: new Uint8Array([1, 2, 3]),
      clusterName: 'constellation',
      apiserverCertSans: ['1.2.3.4', 'api.example'],
      serviceCidr: '10.96.0.0/12',
    };
    const wire = ProtoInitRequest.encode(initRequestToProto(req)).finish();
    expect(plain(initRequestFromProto(ProtoInitRequest.decode(wire)))).toEqual(plain(req));
  });

  it('stream events survive, and owner_id stays empty', () => {
    for (const e of [
      {
        kind: 'success',
        result: { kubeconfig: new Uint8Array([7, 7]), clusterId: new Uint8Array(32).fill(1) },
      },
      {
        kind: 'failure',
        error: 'rpc error: code = FailedPrecondition desc = node is already being activated',
      },
      { kind: 'log', chunk: new TextEncoder().encode('line\n') },
    ] as const) {
      const proto = initEventToProto(e);
      if (proto.initSuccess) expect(proto.initSuccess.ownerId).toHaveLength(0);
      const wire = InitResponse.encode(proto).finish();
      expect(plain(initEventFromProto(InitResponse.decode(wire)))).toEqual(plain(e));
    }
    expect(initEventFromProto({})).toBeUndefined();
  });
});
