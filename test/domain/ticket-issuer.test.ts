/**
 * Join ticket issuance (upstream's steps and CSR checks, with confboot's differences), and the binding
 * of the kubelet CSR to the caller (docs/identity.md): with a PeerIdentity (stubbed here) the name,
 * IP addresses and role must be the caller's instance's; without one, the IP addresses the caller's.
 */
import { describe, expect, it } from 'vitest';
import { KUBERNETES_JOIN_TOKEN_TTL_MS } from '../../src/domain/key-derivation.js';
import { SshCertificateAuthority } from '../../src/domain/ssh-ca.js';
import { TicketIssuer } from '../../src/domain/ticket-issuer.js';
import {
  DENY_LIST_REASON,
  type DenyList,
  type DenyListIdentity,
  type DenyMatch,
} from '../../src/ports/deny-list.js';
import { isDiskBoundError } from '../../src/ports/disk-bindings.js';
import { ConfbootError, type ConfbootErrorCode, isConfbootError } from '../../src/ports/errors.js';
import type { JoinCaller } from '../../src/ports/join-call.js';
import { normalizeNodeName } from '../../src/ports/kubernetes-node.js';
import type { PeerIdentity, PeerInstance } from '../../src/ports/peer-identity.js';
import type { JoinTicketRequest, RejoinTicketRequest } from '../../src/ports/types.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { ticketOf } from '../support/join-call.js';
import {
  bytes,
  filled,
  RecordingLogger,
  StubCa,
  StubDiskBindings,
  StubFacts,
  StubKms,
  StubRandom,
  StubTokens,
  someErr,
} from './stubs.js';

const UUID = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';
// The stub CSR asks for IP 192.0.2.5: the caller's own address.
const PEER = '192.0.2.5:40000';

function setup() {
  const order: string[] = [];
  const s = {
    kms: new StubKms(),
    ca: new StubCa(),
    tokens: new StubTokens(order),
    facts: new StubFacts(),
    diskBindings: new StubDiskBindings(),
    measurementSalt: filled(32, 0x77),
    apiServerEndpoint: '10.0.0.1:6443',
    clock: new FakeClock(),
    random: new StubRandom(),
    logger: new RecordingLogger(),
    order,
  };
  return { ...s, issuer: () => throwing(new TicketIssuer(s)) };
}
type Setup = ReturnType<typeof setup>;

/** The variant every test caller attested with (the issuer does not read it). */
const VARIANT = 'qemu-vtpm';

/** `issuer` as calls that resolve with the ticket and reject with the refusal. */
function throwing(issuer: TicketIssuer) {
  return {
    issueJoinTicket: (r: JoinTicketRequest, c: Omit<JoinCaller, 'variant'>) =>
      ticketOf(issuer.issueJoinTicket(r, { variant: VARIANT, ...c })),
    issueRejoinTicket: (r: RejoinTicketRequest, c: Omit<JoinCaller, 'variant'> = { peer: 'unknown peer' }) =>
      ticketOf(issuer.issueRejoinTicket(r, { variant: VARIANT, ...c })),
  };
}

function req(overrides: Partial<JoinTicketRequest> = {}): JoinTicketRequest {
  return {
    diskUuid: UUID,
    certificateRequest: bytes('csr der'),
    isControlPlane: false,
    hostPublicKey: new Uint8Array(),
    hostCertificatePrincipals: [],
    ...overrides,
  };
}

async function issueErr(s: Setup, r: JoinTicketRequest = req()): Promise<ConfbootError> {
  const err = await s
    .issuer()
    .issueJoinTicket(r, { peer: PEER })
    .catch((e: unknown) => e);
  if (!isConfbootError(err)) throw new Error(`expected a ConfbootError, got ${String(err)}`);
  return err;
}

describe('TicketIssuer.issueJoinTicket', () => {
  it('worker node: issues a complete ticket', async () => {
    const s = setup();
    const t = await s.issuer().issueJoinTicket(req(), { peer: PEER });
    expect(t).toEqual({
      stateDiskKey: StubKms.keyFor(UUID, 32),
      measurementSalt: s.measurementSalt,
      measurementSecret: StubKms.keyFor('measurementSecret', 32),
      kubeletCert: s.ca.cert,
      apiServerEndpoint: '10.0.0.1:6443',
      token: s.tokens.token,
      discoveryTokenCaCertHash: s.tokens.caHash,
      controlPlaneFiles: [],
      kubernetesVersion: '',
      kubernetesComponents: s.facts.componentsValue,
      // Emergency SSH: the CA of data key ca_emergency_ssh; no host key sent, so no host certificate.
      authorizedCaPublicKey: bytes(
        SshCertificateAuthority.fromSeed(StubKms.keyFor('ca_emergency_ssh', 32)).authorizedKey(),
      ),
      hostCertificate: new Uint8Array(),
    });
    // The record names the ticket's bootstrap token and kubelet key (SHA-256 of the stub
    // certificate's SubjectPublicKeyInfo, computed with openssl): only that CSR is approved.
    expect(s.facts.joiningNodes).toEqual([
      {
        nodeName: 'node-1',
        isControlPlane: false,
        grant: {
          bootstrapTokenId: 'abcdef',
          kubeletKeySha256: 'b2122d62a42874121370dbb0e529cb24c2ea2c168f41a43f708bb98e22b6be6f',
        },
      },
    ]);
    expect(s.ca.calls).not.toContain('controlPlaneFiles');
  });

  it('control plane: adds the control-plane files and records a joining control plane', async () => {
    const s = setup();
    const t = await s.issuer().issueJoinTicket(req({ isControlPlane: true }), { peer: PEER });
    expect(t.controlPlaneFiles).toEqual(s.ca.files);
    expect(s.facts.joiningNodes).toMatchObject([{ nodeName: 'node-1', isControlPlane: true }]);
  });

  it.each([
    ['lower case uuid', UUID],
    ['upper case uuid', UUID.toUpperCase()],
  ])('%s: derives the disk key for the lower-cased UUID', async (_name, uuid) => {
    const s = setup();
    await s.issuer().issueJoinTicket(req({ diskUuid: uuid }), { peer: PEER });
    expect(s.kms.calls).toEqual([
      { dataKeyId: 'measurementSecret', length: 32 },
      { dataKeyId: UUID, length: 32 },
      { dataKeyId: 'ca_emergency_ssh', length: 32 },
    ]);
  });

  it('asks the key service for the measurement secret once (first tickets at once share the request), each state disk key every time', async () => {
    const s = setup();
    const issuer = s.issuer();
    const uuid2 = UUID.replace(/^./, 'f');
    const [a, b] = await Promise.all([
      issuer.issueJoinTicket(req(), { peer: PEER }),
      issuer.issueJoinTicket(req({ diskUuid: uuid2 }), { peer: PEER }),
    ]);
    const c = await issuer.issueRejoinTicket({ diskUuid: UUID }, { peer: PEER });
    expect(s.kms.calls.map((x) => x.dataKeyId)).toEqual([
      'measurementSecret',
      UUID,
      'ca_emergency_ssh',
      uuid2,
      UUID,
    ]);
    const secret = StubKms.keyFor('measurementSecret', 32);
    for (const t of [a, b, c]) expect(t.measurementSecret).toEqual(secret);
    // Each ticket has its own copy: changing one changes no other.
    a.measurementSecret.fill(0);
    expect(b.measurementSecret).toEqual(secret);
    expect((await issuer.issueJoinTicket(req(), { peer: PEER })).measurementSecret).toEqual(secret);
  });

  it('does not keep a failed measurement-secret request: the next ticket asks again', async () => {
    const s = setup();
    const issuer = s.issuer();
    s.kms.errFor.set('measurementSecret', new ConfbootError('unavailable', 'key service down'));
    const err = await issuer.issueJoinTicket(req(), { peer: PEER }).catch((e: unknown) => e);
    expect(isConfbootError(err) && err.message).toContain('getting measurement secret: key service down');
    s.kms.errFor.clear();
    const t = await issuer.issueJoinTicket(req(), { peer: PEER });
    expect(t.measurementSecret).toEqual(StubKms.keyFor('measurementSecret', 32));
    expect(s.kms.calls.filter((x) => x.dataKeyId === 'measurementSecret')).toHaveLength(2);
  });

  it('runs no further step once the call is cancelled: no token, no certificate, no record', async () => {
    const s = setup();
    const cancelled = new AbortController();
    const getDataKey = s.kms.getDataKey.bind(s.kms);
    // The caller goes away while the state disk key is being derived.
    s.kms.getDataKey = async (id: string, length: number) => {
      const key = await getDataKey(id, length);
      if (id !== 'measurementSecret') cancelled.abort();
      return key;
    };
    const err = await s
      .issuer()
      .issueJoinTicket(req(), { peer: PEER, signal: cancelled.signal })
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect(s.order).toEqual([]);
    expect(s.facts.joiningNodes).toEqual([]);
  });

  it('creates a 15-minute bootstrap token before computing the CA hash', async () => {
    const s = setup();
    await s.issuer().issueJoinTicket(req(), { peer: PEER });
    expect(s.order).toEqual(['createToken', 'discoveryCaCertHash']);
    expect(s.tokens.ttls).toEqual([KUBERNETES_JOIN_TOKEN_TTL_MS]);
  });

  interface FailCase {
    arrange?: (s: Setup) => void;
    request?: Partial<JoinTicketRequest>;
    wantCode: ConfbootErrorCode;
    wantMessage: string;
    /** Whether the KMS was asked before the failure. */
    wantKms: boolean;
  }
  const failCases: Record<string, FailCase> = {
    'empty disk UUID': {
      request: { diskUuid: '' },
      wantCode: 'invalid-argument',
      wantMessage: 'disk UUID is empty',
      wantKms: false,
    },
    'disk UUID that is not a UUID': {
      request: { diskUuid: '../../etc' },
      wantCode: 'invalid-argument',
      wantMessage: 'is not a UUID',
      wantKms: false,
    },
    'no signing request': {
      request: { certificateRequest: new Uint8Array() },
      wantCode: 'invalid-argument',
      wantMessage: 'no certificate signing request',
      wantKms: false,
    },
    'unparsable signing request': {
      arrange: (s) => {
        s.ca.inspectCsrErr = new ConfbootError('invalid-argument', 'parsing CSR: bad DER');
      },
      wantCode: 'invalid-argument',
      wantMessage: 'bad DER',
      wantKms: false,
    },
    'CSR inspection fails with a plain error': {
      arrange: (s) => {
        s.ca.inspectCsrErr = someErr;
      },
      wantCode: 'invalid-argument',
      wantMessage: 'checking CSR',
      wantKms: false,
    },
    'invalid CSR signature': {
      arrange: (s) => {
        s.ca.csrInfo = { ...s.ca.csrInfo, signatureValid: false };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'signature',
      wantKms: false,
    },
    'incorrect common name format': {
      arrange: (s) => {
        s.ca.csrInfo = { ...s.ca.csrInfo, commonName: 'node-1' };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'common name',
      wantKms: false,
    },
    'incorrect organization format': {
      arrange: (s) => {
        s.ca.csrInfo = { ...s.ca.csrInfo, organizations: ['system:nodes', 'system:masters'] };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'organization',
      wantKms: false,
    },
    'wrong organization': {
      arrange: (s) => {
        s.ca.csrInfo = { ...s.ca.csrInfo, organizations: ['system:masters'] };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'organization',
      wantKms: false,
    },
    'no organization': {
      arrange: (s) => {
        s.ca.csrInfo = { ...s.ca.csrInfo, organizations: [] };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'organization',
      wantKms: false,
    },
    'two common names (Go reads the last, other readers the first)': {
      arrange: (s) => {
        s.ca.csrInfo = {
          ...s.ca.csrInfo,
          subject: [
            [{ type: 'O', value: 'system:nodes' }],
            [{ type: 'CN', value: 'system:node:node-1' }],
            [{ type: 'CN', value: 'system:node:control-plane-0' }],
          ],
        };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'exactly one common name, has 2',
      wantKms: false,
    },
    'a multi-valued RDN': {
      arrange: (s) => {
        s.ca.csrInfo = {
          ...s.ca.csrInfo,
          subject: [
            [{ type: 'O', value: 'system:nodes' }],
            [
              { type: 'CN', value: 'system:node:node-1' },
              { type: 'CN', value: 'system:node:control-plane-0' },
            ],
          ],
        };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'subject RDN 2 holds 2 attributes',
      wantKms: false,
    },
    'an extra OU attribute': {
      arrange: (s) => {
        s.ca.csrInfo = {
          ...s.ca.csrInfo,
          subject: [
            [{ type: 'O', value: 'system:nodes' }],
            [{ type: 'OU', value: 'admins' }],
            [{ type: 'CN', value: 'system:node:node-1' }],
          ],
        };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'may hold only O and CN, also has OU',
      wantKms: false,
    },
    'CN before O': {
      arrange: (s) => {
        s.ca.csrInfo = {
          ...s.ca.csrInfo,
          subject: [[{ type: 'CN', value: 'system:node:node-1' }], [{ type: 'O', value: 'system:nodes' }]],
        };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'must be O=system:nodes followed by CN=system:node:<name>',
      wantKms: false,
    },
    'DNS names in the CSR': {
      arrange: (s) => {
        s.ca.csrInfo = { ...s.ca.csrInfo, dnsNames: ['kubernetes.default'] };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'DNS names',
      wantKms: false,
    },
    'empty node name': {
      arrange: (s) => {
        s.ca.csrInfo = { ...s.ca.csrInfo, commonName: 'system:node:' };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'RFC 1123',
      wantKms: false,
    },
    'node name ending in an underscore': {
      arrange: (s) => {
        s.ca.csrInfo = { ...s.ca.csrInfo, commonName: 'system:node:test_node_' };
      },
      wantCode: 'invalid-argument',
      wantMessage: 'RFC 1123',
      wantKms: false,
    },
    'GetDataKey fails': {
      arrange: (s) => {
        s.kms.errFor.set('measurementSecret', new Error('connection refused'));
      },
      wantCode: 'unavailable',
      wantMessage: 'getting measurement secret: connection refused',
      wantKms: true,
    },
    'state disk key fails': {
      arrange: (s) => {
        s.kms.errFor.set(UUID, new ConfbootError('unavailable', 'key service down'));
      },
      wantCode: 'unavailable',
      wantMessage: 'getting state disk key',
      wantKms: true,
    },
    'token creation fails': {
      arrange: (s) => {
        s.tokens.createTokenErr = someErr;
      },
      wantCode: 'unavailable',
      wantMessage: 'creating bootstrap token',
      wantKms: true,
    },
    'CA hash fails': {
      arrange: (s) => {
        s.tokens.discoveryCaCertHashErr = someErr;
      },
      wantCode: 'unavailable',
      wantMessage: 'computing discovery CA hash',
      wantKms: true,
    },
    'components fail': {
      arrange: (s) => {
        s.facts.componentsErr = someErr;
      },
      wantCode: 'unavailable',
      wantMessage: 'reading Kubernetes components',
      wantKms: true,
    },
    'signing the kubelet certificate fails': {
      arrange: (s) => {
        s.ca.signKubeletCsrErr = someErr;
      },
      wantCode: 'unavailable',
      wantMessage: 'signing kubelet certificate',
      wantKms: true,
    },
    'control-plane files missing': {
      request: { isControlPlane: true },
      arrange: (s) => {
        s.ca.controlPlaneFilesErr = new Error('open /etc/kubernetes/pki/sa.key: no such file');
      },
      wantCode: 'unavailable',
      wantMessage: 'loading control-plane files',
      wantKms: true,
    },
    'another control plane is already joining': {
      request: { isControlPlane: true },
      arrange: (s) => {
        s.facts.addJoiningNodeErr = new ConfbootError(
          'failed-precondition',
          'another control plane is joining',
        );
      },
      wantCode: 'failed-precondition',
      wantMessage: 'another control plane is joining',
      wantKms: true,
    },
  };

  it.each(Object.entries(failCases))('%s', async (_name, tc) => {
    const s = setup();
    tc.arrange?.(s);
    const err = await issueErr(s, req(tc.request));
    expect(err.code).toBe(tc.wantCode);
    expect(err.message).toContain(tc.wantMessage);
    expect(err.message).toContain(`issuing join ticket for ${PEER}`);
    expect(s.kms.calls.length > 0).toBe(tc.wantKms);
    expect(s.facts.joiningNodes).toEqual([]);
  });

  it('keeps the cause of a dependency failure', async () => {
    const s = setup();
    const cause = new Error('connection refused');
    s.kms.getDataKeyErr = cause;
    expect((await issueErr(s)).cause).toBe(cause);
  });

  it('never puts the token or a key into errors or logs', async () => {
    const s = setup();
    await s.issuer().issueJoinTicket(req(), { peer: PEER });
    s.facts.addJoiningNodeErr = someErr;
    const err = await issueErr(s);
    const text = `${s.logger.text()} ${err.message}`;
    expect(text).not.toContain(s.tokens.token);
    for (const secret of [StubKms.keyFor(UUID, 32), StubKms.keyFor('measurementSecret', 32)]) {
      expect(text).not.toContain(Buffer.from(secret).toString('hex'));
      expect(text).not.toContain(Buffer.from(secret).toString('base64'));
    }
  });

  it('records the normalised node name', async () => {
    const s = setup();
    s.ca.csrInfo = { ...s.ca.csrInfo, commonName: 'system:node:Worker_1.Zone-A' };
    await s.issuer().issueJoinTicket(req(), { peer: PEER });
    expect(s.facts.joiningNodes[0]?.nodeName).toBe('worker-1.zone-a');
  });

  it('returns a copy of the measurement salt', async () => {
    const s = setup();
    const t = await s.issuer().issueJoinTicket(req(), { peer: PEER });
    t.measurementSalt.fill(0);
    const t2 = await s.issuer().issueJoinTicket(req(), { peer: PEER });
    expect(t2.measurementSalt).toEqual(filled(32, 0x77));
  });

  it('returns a copy of the measurement salt when it was given as a Buffer (whose slice is a view)', async () => {
    const given = Buffer.alloc(32, 0x77);
    const issuer = throwing(new TicketIssuer({ ...setup(), measurementSalt: given }));
    const t = await issuer.issueJoinTicket(req(), { peer: PEER });
    t.measurementSalt.fill(0);
    given.fill(1);
    const t2 = await issuer.issueJoinTicket(req(), { peer: PEER });
    expect([...t2.measurementSalt]).toEqual([...filled(32, 0x77)]);
  });

  it.each([
    ['an empty measurement salt', { measurementSalt: new Uint8Array() }],
    ['an empty API server endpoint', { apiServerEndpoint: '' }],
  ])('refuses to start with %s', (_name, override) => {
    const s = setup();
    expect(() => new TicketIssuer({ ...s, ...override })).toThrow('ticket issuer');
  });
});

describe('normalizeNodeName', () => {
  it.each([
    ['node-1', 'node-1'],
    ['Node_1', 'node-1'],
    ['worker.zone-a.example', 'worker.zone-a.example'],
    ['a', 'a'],
    ['0', '0'],
    [`${'a'.repeat(63)}.b`, `${'a'.repeat(63)}.b`],
  ])('accepts %j as %j', (name, want) => {
    expect(normalizeNodeName(name)).toBe(want);
  });

  it.each([
    ['an empty name', ''],
    ['a trailing underscore', 'test_node_'],
    ['a leading hyphen', '-node'],
    ['an empty label', 'a..b'],
    ['a trailing dot', 'node.'],
    ['a slash', 'a/b'],
    ['a space', 'a b'],
    ['a 64-character label', 'a'.repeat(64)],
    ['more than 253 characters', `${'a'.repeat(63)}.`.repeat(4) + 'aa'],
  ])('rejects %s', (_name, name) => {
    expect(() => normalizeNodeName(name)).toThrow('RFC 1123');
  });
});

describe('TicketIssuer.issueRejoinTicket', () => {
  it.each([
    ['lower case uuid', UUID],
    ['upper case uuid', UUID.toUpperCase()],
  ])('%s: returns the disk key for the lower-cased UUID and the measurement secret', async (_name, uuid) => {
    const s = setup();
    const t = await s.issuer().issueRejoinTicket({ diskUuid: uuid }, { peer: PEER });
    expect(t).toEqual({
      stateDiskKey: StubKms.keyFor(UUID, 32),
      measurementSecret: StubKms.keyFor('measurementSecret', 32),
    });
    expect(s.kms.calls.map((c) => c.dataKeyId)).toEqual(['measurementSecret', UUID]);
  });

  it('does not talk to Kubernetes', async () => {
    const s = setup();
    await s.issuer().issueRejoinTicket({ diskUuid: UUID });
    expect([s.order, s.ca.calls, s.facts.joiningNodes]).toEqual([[], [], []]);
  });

  it.each([
    ['an empty disk UUID', { diskUuid: '' }, 'invalid-argument'],
    ['a disk UUID that is not a UUID', { diskUuid: 'state' }, 'invalid-argument'],
  ])('rejects %s', async (_name, r, code) => {
    const s = setup();
    const err = await s
      .issuer()
      .issueRejoinTicket(r, { peer: PEER })
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe(code);
    expect(s.kms.calls).toEqual([]);
  });

  it.each([
    ['the measurement secret', 'measurementSecret'],
    ['the state disk key', UUID],
  ])('maps a KMS failure for %s to unavailable', async (_name, id) => {
    const s = setup();
    s.kms.errFor.set(id, new Error('connection refused'));
    const err = await s
      .issuer()
      .issueRejoinTicket({ diskUuid: UUID }, { peer: PEER })
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('unavailable');
    expect((err as Error).message).toContain(`issuing rejoin ticket for ${PEER}`);
  });
});

/** A PeerIdentity over a fixed table of instances; records every address it was asked about. */
class StubIdentity implements PeerIdentity {
  readonly asked: string[] = [];
  err?: Error;
  constructor(readonly instances: Record<string, PeerInstance>) {}
  async resolve(peerIp: string): Promise<PeerInstance | undefined> {
    this.asked.push(peerIp);
    if (this.err) throw this.err;
    return this.instances[peerIp];
  }
}

function withIdentity(instances: Record<string, PeerInstance>) {
  const s = setup();
  const identity = new StubIdentity(instances);
  return { ...s, identity, issuer: () => throwing(new TicketIssuer({ ...s, identity })) };
}

const NODE_1: PeerInstance = { name: 'node-1', ips: ['192.0.2.5'], role: 'Worker' };

async function refusal(s: ReturnType<typeof withIdentity> | Setup, r = req(), peer = PEER) {
  const err = await s
    .issuer()
    .issueJoinTicket(r, { peer })
    .catch((e: unknown) => e);
  if (!isConfbootError(err)) throw new Error(`expected a ConfbootError, got ${String(err)}`);
  // Every refusal of the request itself comes before any key, token or certificate.
  expect(s.kms.calls).toEqual([]);
  expect(s.tokens.ttls).toEqual([]);
  expect(s.ca.calls).not.toContain('signKubeletCsr');
  expect(s.facts.joiningNodes).toEqual([]);
  return err;
}

describe('TicketIssuer: the kubelet CSR is bound to the caller', () => {
  describe("without a PeerIdentity (minimum binding: IP addresses are the caller's)", () => {
    it('issues when the CSR has no IP address', async () => {
      const s = setup();
      s.ca.csrInfo = { ...s.ca.csrInfo, ipAddresses: [] };
      await s.issuer().issueJoinTicket(req(), { peer: PEER });
      expect(s.ca.calls).toContain('signKubeletCsr');
    });

    it('signs for the checked name and canonical addresses only, never what the CSR spelled', async () => {
      const s = setup();
      s.ca.csrInfo = { ...s.ca.csrInfo, commonName: 'system:node:Node_1', ipAddresses: ['::ffff:192.0.2.5'] };
      await s.issuer().issueJoinTicket(req(), { peer: PEER });
      expect(s.ca.signedFor).toEqual([{ nodeName: 'node-1', ipAddresses: ['192.0.2.5'] }]);
    });

    it("refuses IP addresses other than the caller's with invalid-argument naming them", async () => {
      const s = setup();
      s.ca.csrInfo = { ...s.ca.csrInfo, ipAddresses: ['192.0.2.5', '8.8.8.8', '10.96.0.1'] };
      const err = await refusal(s);
      expect(err.code).toBe('invalid-argument');
      expect(err.recoverable).toBe(false);
      expect(err.message).toBe(
        `issuing join ticket for ${PEER}: checking CSR: kubelet CSR: IP addresses 8.8.8.8, 10.96.0.1 are not addresses of the caller's address 192.0.2.5 (allowed: 192.0.2.5)`,
      );
    });

    it.each([
      ['IPv6 caller', '2001:db8::5:40000', ['2001:0DB8:0:0:0:0:0:5']],
      ['bracketed IPv6 caller', '[2001:db8::5]:40000', ['2001:db8::5']],
      ['IPv4-mapped IPv6 caller', '::ffff:192.0.2.5:40000', ['192.0.2.5']],
      ['IPv4 caller, CSR with the IPv4-mapped form', '192.0.2.5:40000', ['::ffff:192.0.2.5']],
    ])('%s: the same address written differently matches', async (_name, peer, ips) => {
      const s = setup();
      s.ca.csrInfo = { ...s.ca.csrInfo, ipAddresses: ips };
      await s.issuer().issueJoinTicket(req(), { peer });
      expect(s.ca.calls).toContain('signKubeletCsr');
    });

    it('a caller address without an IP allows no IP address', async () => {
      const s = setup();
      const err = await refusal(s, req(), 'unknown peer');
      expect(err.code).toBe('invalid-argument');
      expect(err.message).toContain('allowed: none');
    });
  });

  describe('with a PeerIdentity', () => {
    it("issues when name, addresses and role are the caller's instance's; asks for the caller IP", async () => {
      const s = withIdentity({ '192.0.2.5': { ...NODE_1, ips: ['192.0.2.5', '192.0.2.6'] } });
      await s.issuer().issueJoinTicket(req(), { peer: PEER });
      expect(s.identity.asked).toEqual(['192.0.2.5']);
      expect(s.facts.joiningNodes).toMatchObject([{ nodeName: 'node-1', isControlPlane: false }]);
    });

    it('asks with the IPv4 address of an IPv4-mapped caller', async () => {
      const s = withIdentity({ '192.0.2.5': NODE_1 });
      await s.issuer().issueJoinTicket(req(), { peer: '::ffff:192.0.2.5:40000' });
      expect(s.identity.asked).toEqual(['192.0.2.5']);
    });

    it('a caller that is no instance of this cluster: permission-denied', async () => {
      const s = withIdentity({});
      const err = await refusal(s);
      expect(err.code).toBe('permission-denied');
      expect(err.recoverable).toBe(false);
      expect(err.message).toBe(
        `issuing join ticket for ${PEER}: caller 192.0.2.5 is not an instance of this cluster`,
      );
    });

    it('a caller address without an IP: permission-denied, metadata not asked', async () => {
      const s = withIdentity({ '192.0.2.5': NODE_1 });
      const err = await refusal(s, req(), 'unknown peer');
      expect(err.code).toBe('permission-denied');
      expect(err.message).toContain('caller unknown peer is not an instance of this cluster');
      expect(s.identity.asked).toEqual([]);
    });

    it("a CSR for another node's name: permission-denied naming both names", async () => {
      const s = withIdentity({ '192.0.2.5': { ...NODE_1, name: 'worker-2' } });
      const err = await refusal(s);
      expect(err.code).toBe('permission-denied');
      expect(err.message).toBe(
        `issuing join ticket for ${PEER}: kubelet CSR is for node "node-1", but caller 192.0.2.5 is node "worker-2"`,
      );
    });

    it('compares names after the same normalisation (metadata "Node_1" is node-1)', async () => {
      const s = withIdentity({ '192.0.2.5': { ...NODE_1, name: 'Node_1' } });
      s.ca.csrInfo = { ...s.ca.csrInfo, commonName: 'system:node:NODE-1' };
      await s.issuer().issueJoinTicket(req(), { peer: PEER });
      expect(s.facts.joiningNodes).toMatchObject([{ nodeName: 'node-1', isControlPlane: false }]);
    });

    it("IP addresses that are not the instance's: invalid-argument naming the extra ones", async () => {
      const s = withIdentity({ '192.0.2.5': NODE_1 });
      s.ca.csrInfo = { ...s.ca.csrInfo, ipAddresses: ['192.0.2.5', '8.8.8.8', '10.96.0.1'] };
      const err = await refusal(s);
      expect(err.code).toBe('invalid-argument');
      expect(err.message).toBe(
        `issuing join ticket for ${PEER}: checking CSR: kubelet CSR: IP addresses 8.8.8.8, 10.96.0.1 are not addresses of node "node-1" (allowed: 192.0.2.5)`,
      );
    });

    it("the instance's addresses decide, not the caller's (a second NIC address is allowed)", async () => {
      const s = withIdentity({ '192.0.2.5': { ...NODE_1, ips: ['10.0.0.9'] } });
      s.ca.csrInfo = { ...s.ca.csrInfo, ipAddresses: ['10.0.0.9'] };
      await s.issuer().issueJoinTicket(req(), { peer: PEER });
      expect(s.ca.calls).toContain('signKubeletCsr');
    });

    it('a worker asking for control-plane files: permission-denied', async () => {
      const s = withIdentity({ '192.0.2.5': NODE_1 });
      const err = await refusal(s, req({ isControlPlane: true }));
      expect(err.code).toBe('permission-denied');
      expect(err.message).toBe(
        `issuing join ticket for ${PEER}: node "node-1" is a worker and may not join as a control plane (no control-plane files)`,
      );
      expect(s.ca.calls).not.toContain('controlPlaneFiles');
    });

    it('a control plane asking to join as a worker: permission-denied', async () => {
      const s = withIdentity({ '192.0.2.5': { ...NODE_1, role: 'ControlPlane' } });
      const err = await refusal(s);
      expect(err.code).toBe('permission-denied');
      expect(err.message).toContain('node "node-1" is a control plane and may not join as a worker');
    });

    it('a control plane joining as a control plane gets the control-plane files', async () => {
      const s = withIdentity({ '192.0.2.5': { ...NODE_1, role: 'ControlPlane' } });
      const t = await s.issuer().issueJoinTicket(req({ isControlPlane: true }), { peer: PEER });
      expect(t.controlPlaneFiles).toEqual(s.ca.files);
    });

    it('an instance without a name or role yet: unavailable (the node retries)', async () => {
      for (const instance of [
        { ...NODE_1, role: 'Unknown' as const },
        { ...NODE_1, name: '' },
      ]) {
        const s = withIdentity({ '192.0.2.5': instance });
        const err = await refusal(s);
        expect(err.code).toBe('unavailable');
        expect(err.recoverable).toBe(true);
        expect(err.message).toContain('has not assigned a name and role to caller 192.0.2.5 yet');
      }
    });

    it('metadata down: unavailable with the cause, nothing issued', async () => {
      const s = withIdentity({ '192.0.2.5': NODE_1 });
      s.identity.err = new ConfbootError('unavailable', 'listing instances: 503');
      const err = await refusal(s);
      expect(err.code).toBe('unavailable');
      expect(err.recoverable).toBe(true);
      expect(err.message).toBe(
        `issuing join ticket for ${PEER}: resolving the caller's instance: listing instances: 503`,
      );
      expect(err.cause).toBe(s.identity.err);
    });

    it('a bad CSR is refused as before, without asking metadata', async () => {
      const s = withIdentity({ '192.0.2.5': NODE_1 });
      s.ca.csrInfo = { ...s.ca.csrInfo, dnsNames: ['kubernetes.default'] };
      const err = await refusal(s);
      expect(err.code).toBe('invalid-argument');
      expect(s.identity.asked).toEqual([]);
    });
  });
});

describe('TicketIssuer: state disks are bound to the node that first asked for them', () => {
  const NODE_2: PeerInstance = { name: 'node-2', ips: ['192.0.2.6'], role: 'Worker' };
  const PEER_2 = '192.0.2.6:40000';
  const asNode2 = (s: ReturnType<typeof withIdentity>) => {
    s.ca.csrInfo = { ...s.ca.csrInfo, commonName: 'system:node:node-2', ipAddresses: ['192.0.2.6'] };
  };

  it('records the joining node (instance) for its disk and issues', async () => {
    const s = withIdentity({ '192.0.2.5': NODE_1 });
    await s.issuer().issueJoinTicket(req(), { peer: PEER });
    expect([...s.diskBindings.records.values()]).toEqual([
      { diskUuid: UUID, nodeName: 'node-1', owner: 'instance/node-1' },
    ]);
    // The same node joining again, and rejoining, with its disk is fine.
    await s.issuer().issueJoinTicket(req({ diskUuid: UUID.toUpperCase() }), { peer: PEER });
    const r = await s.issuer().issueRejoinTicket({ diskUuid: UUID }, { peer: PEER });
    expect(r.stateDiskKey).toEqual(StubKms.keyFor(UUID, 32));
  });

  it("refuses another node's join with a bound disk UUID before any key, token or certificate", async () => {
    const s = withIdentity({ '192.0.2.5': NODE_1, '192.0.2.6': NODE_2 });
    await s.issuer().issueJoinTicket(req(), { peer: PEER });
    s.kms.calls.length = 0;
    s.tokens.ttls.length = 0;
    s.ca.calls.length = 0;
    s.facts.joiningNodes.length = 0;
    asNode2(s);
    const err = await refusal(s, req(), PEER_2);
    expect(isDiskBoundError(err)).toBe(true);
    expect(err.code).toBe('permission-denied');
    expect(err.message).toBe(`issuing join ticket for ${PEER_2}: disk ${UUID} belongs to another node`);
    expect(s.diskBindings.records.get(UUID)?.owner).toBe('instance/node-1');
  });

  it("refuses another node's rejoin with a bound disk UUID (no key-service call)", async () => {
    const s = withIdentity({ '192.0.2.5': NODE_1, '192.0.2.6': NODE_2 });
    await s.issuer().issueJoinTicket(req(), { peer: PEER });
    s.kms.calls.length = 0;
    const err = await s
      .issuer()
      .issueRejoinTicket({ diskUuid: UUID }, { peer: PEER_2 })
      .catch((e: unknown) => e);
    expect(isDiskBoundError(err)).toBe(true);
    expect(s.kms.calls).toEqual([]);
  });

  it('binds an unbound disk to the node that rejoins with it first (disks joined before bindings existed)', async () => {
    const s = withIdentity({ '192.0.2.5': NODE_1, '192.0.2.6': NODE_2 });
    await s.issuer().issueRejoinTicket({ diskUuid: UUID }, { peer: PEER });
    expect(s.diskBindings.records.get(UUID)).toEqual({
      diskUuid: UUID,
      nodeName: 'node-1',
      owner: 'instance/node-1',
    });
    const err = await s
      .issuer()
      .issueRejoinTicket({ diskUuid: UUID }, { peer: PEER_2 })
      .catch((e: unknown) => e);
    expect(isDiskBoundError(err)).toBe(true);
  });

  it("records the cloud's immutable instance ID: two instances whose names fold alike do not share a disk", async () => {
    // Node_1 and node-1 fold to the same node name; the cloud tells them apart by instance ID.
    const first = { ...NODE_1, name: 'Node_1', instanceId: '1234567890123' };
    const second = { ...NODE_1, ips: ['192.0.2.6'], instanceId: '9876543210987' };
    const s = withIdentity({ '192.0.2.5': first, '192.0.2.6': second });
    await s.issuer().issueRejoinTicket({ diskUuid: UUID }, { peer: PEER });
    expect(s.diskBindings.records.get(UUID)).toEqual({
      diskUuid: UUID,
      nodeName: 'node-1',
      owner: 'instance-id/1234567890123',
    });
    const kmsBefore = s.kms.calls.length;
    const err = await s
      .issuer()
      .issueRejoinTicket({ diskUuid: UUID }, { peer: PEER_2 })
      .catch((e: unknown) => e);
    expect(isDiskBoundError(err)).toBe(true);
    expect(s.kms.calls.length).toBe(kmsBefore);
    // The instance the disk is bound to still gets it.
    await s.issuer().issueRejoinTicket({ diskUuid: UUID }, { peer: PEER });
  });

  it('a binding recorded by name before IDs were recorded still matches the instance of that name', async () => {
    const s = withIdentity({ '192.0.2.5': { ...NODE_1, instanceId: 'i-0abc' } });
    s.diskBindings.records.set(UUID, { diskUuid: UUID, nodeName: 'node-1', owner: 'instance/node-1' });
    const ticket = await s.issuer().issueRejoinTicket({ diskUuid: UUID }, { peer: PEER });
    expect(ticket.stateDiskKey.length).toBeGreaterThan(0);
    expect(s.diskBindings.records.get(UUID)?.owner).toBe('instance/node-1');
  });

  it('fails closed when the record cannot be read: unavailable, nothing issued (join and rejoin)', async () => {
    const s = withIdentity({ '192.0.2.5': NODE_1 });
    s.diskBindings.err = new ConfbootError('unavailable', 'Kubernetes API unreachable');
    const err = await refusal(s);
    expect(err.code).toBe('unavailable');
    expect(err.message).toContain(`recording which node disk ${UUID} belongs to`);
    const rejoin = await s
      .issuer()
      .issueRejoinTicket({ diskUuid: UUID }, { peer: PEER })
      .catch((e: unknown) => e);
    expect(isConfbootError(rejoin) && rejoin.code).toBe('unavailable');
    expect(s.kms.calls).toEqual([]);
    // A record error that is not a ConfbootError is a dependency failure as well.
    s.diskBindings.err = new Error('socket hang up');
    expect((await refusal(s)).code).toBe('unavailable');
  });

  it('without a PeerIdentity the owner is the caller address: another address is refused', async () => {
    const s = setup();
    await s.issuer().issueJoinTicket(req(), { peer: PEER });
    expect(s.diskBindings.records.get(UUID)?.owner).toBe('address/192.0.2.5');
    s.ca.csrInfo = { ...s.ca.csrInfo, ipAddresses: [] };
    const kmsBefore = s.kms.calls.length;
    const err = await s
      .issuer()
      .issueJoinTicket(req(), { peer: '192.0.2.99:1234' })
      .catch((e: unknown) => e);
    expect(isDiskBoundError(err)).toBe(true);
    const rejoin = await s
      .issuer()
      .issueRejoinTicket({ diskUuid: UUID }, { peer: '192.0.2.99:1234' })
      .catch((e: unknown) => e);
    expect(isDiskBoundError(rejoin)).toBe(true);
    expect(s.kms.calls.length).toBe(kmsBefore);
  });

  it('a rejoin from an address that is no instance of the cluster is refused (with a PeerIdentity)', async () => {
    const s = withIdentity({ '192.0.2.5': NODE_1 });
    const err = await s
      .issuer()
      .issueRejoinTicket({ diskUuid: UUID }, { peer: '203.0.113.9:1' })
      .catch((e: unknown) => e);
    expect(isConfbootError(err) && err.code).toBe('permission-denied');
    expect(s.diskBindings.calls).toEqual([]);
    expect(s.kms.calls).toEqual([]);
  });
});

describe("TicketIssuer: a fresh join releases its instance's stale disk bindings (reset rule)", () => {
  const OLD = '11111111-2222-4333-8444-555555555555';
  const OTHERS = '99999999-2222-4333-8444-555555555555';
  const decide = (s: ReturnType<typeof withIdentity> | Setup, peer = PEER) =>
    new TicketIssuer({ ...s, ...('identity' in s ? { identity: s.identity } : {}) }).issueJoinTicket(req(), {
      peer,
      variant: VARIANT,
    });

  it("keeps the presented disk, removes the instance's other bindings (also by its legacy name) and names them", async () => {
    const s = withIdentity({ '192.0.2.5': { ...NODE_1, instanceId: 'i-1' } });
    s.diskBindings.records.set(OLD, { diskUuid: OLD, nodeName: 'node-1', owner: 'instance-id/i-1' });
    const legacy = '22222222-2222-4333-8444-555555555555';
    s.diskBindings.records.set(legacy, { diskUuid: legacy, nodeName: 'node-1', owner: 'instance/node-1' });
    s.diskBindings.records.set(OTHERS, { diskUuid: OTHERS, nodeName: 'node-2', owner: 'instance-id/i-2' });
    const decision = await decide(s);
    expect(decision.issued).toBe(true);
    expect(decision.releasedDisks?.sort()).toEqual([legacy, OLD].sort());
    expect(s.diskBindings.releaseCalls).toEqual([
      { owners: ['instance-id/i-1', 'instance/node-1'], keep: UUID },
    ]);
    expect([...s.diskBindings.records.keys()].sort()).toEqual([OTHERS, UUID].sort());
    expect(s.logger.events.find((e) => e.msg.startsWith('Released stale disk bindings'))?.fields).toEqual({
      owner: 'instance-id/i-1',
      kept: UUID,
      released: expect.arrayContaining([OLD, legacy]),
    });
  });

  it('a join with nothing stale names nothing; a rejoin never releases', async () => {
    const s = withIdentity({ '192.0.2.5': NODE_1 });
    expect((await decide(s)).releasedDisks).toBeUndefined();
    s.diskBindings.records.set(OLD, { diskUuid: OLD, nodeName: 'node-1', owner: 'instance/node-1' });
    s.diskBindings.releaseCalls.length = 0;
    await s.issuer().issueRejoinTicket({ diskUuid: UUID }, { peer: PEER });
    expect(s.diskBindings.releaseCalls).toEqual([]);
    expect(s.diskBindings.records.has(OLD)).toBe(true);
  });

  it('without a PeerIdentity nothing is released (bindings by address are never released)', async () => {
    const s = setup();
    s.diskBindings.records.set(OLD, { diskUuid: OLD, nodeName: 'x', owner: 'address/192.0.2.5' });
    const decision = await decide(s);
    expect(decision.issued).toBe(true);
    expect(decision.releasedDisks).toBeUndefined();
    expect(s.diskBindings.releaseCalls).toEqual([]);
    expect(s.diskBindings.records.has(OLD)).toBe(true);
  });

  it('a refused or cancelled join releases nothing', async () => {
    const s = withIdentity({ '192.0.2.5': NODE_1 });
    s.diskBindings.records.set(UUID, { diskUuid: UUID, nodeName: 'node-2', owner: 'instance/node-2' });
    s.diskBindings.records.set(OLD, { diskUuid: OLD, nodeName: 'node-1', owner: 'instance/node-1' });
    const refused = await decide(s);
    expect(refused.issued).toBe(false);
    expect(isDiskBoundError(refused.issued ? undefined : refused.refusal)).toBe(true);
    const cancelled = new AbortController();
    cancelled.abort();
    s.diskBindings.records.delete(UUID);
    const decision = await new TicketIssuer({ ...s, identity: s.identity }).issueJoinTicket(req(), {
      peer: PEER,
      variant: VARIANT,
      signal: cancelled.signal,
    });
    expect(decision.issued).toBe(false);
    expect(s.diskBindings.releaseCalls).toEqual([]);
    expect(s.diskBindings.records.has(OLD)).toBe(true);
  });

  it('a release that fails is logged and the join is still issued', async () => {
    const s = withIdentity({ '192.0.2.5': NODE_1 });
    s.diskBindings.records.set(OLD, { diskUuid: OLD, nodeName: 'node-1', owner: 'instance/node-1' });
    s.diskBindings.releaseErr = new ConfbootError('unavailable', 'Kubernetes API unreachable');
    const decision = await decide(s);
    expect(decision.issued).toBe(true);
    expect(decision.releasedDisks).toBeUndefined();
    expect(s.logger.events.find((e) => e.level === 'warn')).toMatchObject({
      msg: 'Could not release stale disk bindings of the joining instance',
      fields: { owner: 'instance/node-1', error: 'Kubernetes API unreachable' },
    });
  });
});

/** A deny list over fixed sets (already spelt as the issuer records them); records every question. */
class StubDenyList implements DenyList {
  readonly asked: DenyListIdentity[] = [];
  constructor(
    readonly nodes: string[] = [],
    readonly disks: string[] = [],
  ) {}
  match(identity: DenyListIdentity): DenyMatch | undefined {
    this.asked.push({ ...identity });
    const disk = identity.diskUuid?.toLowerCase();
    if (disk !== undefined && this.disks.includes(disk)) return { kind: 'disk-uuid', value: disk };
    if (identity.nodeName !== undefined && this.nodes.includes(identity.nodeName))
      return { kind: 'node', value: identity.nodeName };
    return undefined;
  }
  get size() {
    return { nodes: this.nodes.length, diskUuids: this.disks.length };
  }
}

function withDenyList(nodes: string[], disks: string[] = []) {
  const s = withIdentity({ '192.0.2.5': NODE_1 });
  const denyList = new StubDenyList(nodes, disks);
  const named: string[] = [];
  const issuer = () => throwing(new TicketIssuer({ ...s, identity: s.identity, denyList }));
  /** Resolves with the refusal, or with undefined when a ticket was issued; the node it named goes to `named`. */
  const join = async (r = req()): Promise<ConfbootError | undefined> => {
    const decision = await new TicketIssuer({ ...s, identity: s.identity, denyList }).issueJoinTicket(r, {
      peer: PEER,
      variant: VARIANT,
    });
    if (decision.nodeName !== undefined) named.push(decision.nodeName);
    return decision.issued ? undefined : (decision.refusal as ConfbootError);
  };
  return { ...s, denyList, named, issuer, join };
}

describe('TicketIssuer: the deny list (DenyList port), asked once the request names the node', () => {
  it('refuses a denied node name (CSR spelt in upper case): permission-denied, reason deny-list, before anything else is asked', async () => {
    const s = withDenyList(['node-1']);
    s.ca.csrInfo = { ...s.ca.csrInfo, commonName: 'system:node:Node_1' };
    const err = await s.join();
    expect(err).toMatchObject({ code: 'permission-denied', reason: DENY_LIST_REASON, recoverable: false });
    expect(err?.message).toBe(
      `issuing join ticket for ${PEER}: node "node-1" is on the join service's deny list`,
    );
    // The CSR was parsed once, the node named for the audit, and nothing else was asked.
    expect(s.ca.calls).toEqual(['inspectCsr']);
    expect(s.named).toEqual(['node-1']);
    expect(s.denyList.asked).toEqual([{ nodeName: 'node-1', diskUuid: UUID }]);
    expect(s.identity.asked).toEqual([]);
    expect(s.diskBindings.calls).toEqual([]);
    expect(s.kms.calls).toEqual([]);
    expect(s.tokens.ttls).toEqual([]);
  });

  it('refuses a denied disk UUID (sent in upper case) for join and rejoin', async () => {
    const s = withDenyList([], [UUID]);
    const err = await s.join(req({ diskUuid: UUID.toUpperCase() }));
    expect(err).toMatchObject({ code: 'permission-denied', reason: DENY_LIST_REASON });
    expect(err?.message).toContain(`disk ${UUID} is on the join service's deny list`);
    const rejoin = await s
      .issuer()
      .issueRejoinTicket({ diskUuid: UUID.toUpperCase() }, { peer: PEER })
      .catch((e: unknown) => e as ConfbootError);
    expect(rejoin).toMatchObject({ code: 'permission-denied', reason: DENY_LIST_REASON });
    expect(s.identity.asked).toEqual([]);
    expect(s.diskBindings.calls).toEqual([]);
    expect(s.kms.calls).toEqual([]);
  });

  it("refuses a rejoin by the caller's resolved instance name before the disk binding is asked", async () => {
    const s = withDenyList(['node-1']);
    const err = await s
      .issuer()
      .issueRejoinTicket({ diskUuid: UUID }, { peer: PEER })
      .then(
        () => undefined,
        (e: unknown) => e as ConfbootError,
      );
    expect(err).toMatchObject({ code: 'permission-denied', reason: DENY_LIST_REASON });
    expect(err?.message).toBe(
      `issuing rejoin ticket for ${PEER}: node "node-1" is on the join service's deny list`,
    );
    expect(s.diskBindings.calls).toEqual([]);
    expect(s.kms.calls).toEqual([]);
  });

  it('without a PeerIdentity, refuses a rejoin by the node name the disk was bound under when it joined', async () => {
    const s = setup();
    await throwing(new TicketIssuer(s)).issueJoinTicket(req(), { peer: PEER });
    const kmsCalls = s.kms.calls.length;
    const denyList = new StubDenyList(['node-1'], []);
    const err = await throwing(new TicketIssuer({ ...s, denyList }))
      .issueRejoinTicket({ diskUuid: UUID }, { peer: PEER })
      .then(
        () => undefined,
        (e: unknown) => e as ConfbootError,
      );
    expect(err).toMatchObject({ code: 'permission-denied', reason: DENY_LIST_REASON });
    expect(err?.message).toContain('node "node-1" is on the join service\'s deny list');
    expect(s.kms.calls.length).toBe(kmsCalls);
  });

  it('issues to a node that is not on the list, and names it for the audit', async () => {
    const s = withDenyList(['node-2'], ['00000000-0000-4000-8000-000000000000']);
    expect(await s.join()).toBeUndefined();
    expect(s.named).toEqual(['node-1']);
    expect(s.denyList.asked).toEqual([{ nodeName: 'node-1', diskUuid: UUID }]);
  });

  it('a CSR that does not parse is refused as invalid before the deny list is asked, and names no node', async () => {
    const s = withDenyList(['node-1']);
    s.ca.inspectCsrErr = someErr;
    const err = await s.join();
    expect(err?.code).toBe('invalid-argument');
    expect(s.named).toEqual([]);
    expect(s.denyList.asked).toEqual([]);
  });
});
