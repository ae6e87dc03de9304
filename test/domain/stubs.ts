/**
 * Hand-written test doubles for the domain tests, in upstream's style: one small stub per port,
 * with a per-method error field (`xErr`), a scripted answer queue (`xAnswers`, consumed first; an
 * Error in the queue is thrown) and a call recorder (`calls` or `xCalls`). No behaviour beyond that.
 */

import type { BootstrapTokens } from '../../src/ports/bootstrap-tokens.js';
import type {
  CertificateAuthority,
  CsrInfo,
  KubeletIdentity,
} from '../../src/ports/certificate-authority.js';
import type { ClusterFacts } from '../../src/ports/cluster-facts.js';
import type { ClusterInitializer, InitClusterArgs } from '../../src/ports/cluster-initializer.js';
import type { ClusterJoiner, JoinClusterArgs } from '../../src/ports/cluster-joiner.js';
import type { CsrFactory, KubeletCsr } from '../../src/ports/csr-factory.js';
import type { DiskBinding, DiskBindings } from '../../src/ports/disk-bindings.js';
import type { EncryptedDisk } from '../../src/ports/encrypted-disk.js';
import type { FileWriter } from '../../src/ports/file-writer.js';
import type { JoinTicketClient } from '../../src/ports/join-ticket-client.js';
import type { KubeletCredentialsGrant } from '../../src/ports/joining-nodes.js';
import type { KMS } from '../../src/ports/kms.js';
import type { KmsFactory } from '../../src/ports/kms-factory.js';
import type { LogCollector } from '../../src/ports/log-collector.js';
import type { Logger } from '../../src/ports/logger.js';
import type { MetadataAPI } from '../../src/ports/metadata-api.js';
import type { NodeMarker } from '../../src/ports/node-marker.js';
import type { NodeStateStore } from '../../src/ports/node-state-store.js';
import type { Random } from '../../src/ports/random.js';
import type { SecretHash } from '../../src/ports/secret-hash.js';
import type {
  CallOptions,
  Component,
  ControlPlaneFile,
  Endpoint,
  InstanceMetadata,
  JoinTicket,
  JoinTicketRequest,
  NodeState,
  RejoinTicket,
  RejoinTicketRequest,
} from '../../src/ports/types.js';
import { FakeClock, flushMicrotasks } from '../fakes/fake-clock.js';

/** An error to put into stubs. */
export const someErr = new Error('failed');

/** Next scripted answer, else the error field, else the default value. */
function answer<T>(queue: Array<T | Error>, err: Error | undefined, value: T): Promise<T> {
  const next = queue.length > 0 ? queue.shift() : (err ?? value);
  return next instanceof Error ? Promise.reject(next) : Promise.resolve(next as T);
}

/** A promise that never settles unless the call's signal aborts (a hanging dependency). */
export function hang<T>(options?: CallOptions): Promise<T> {
  return new Promise((_resolve, reject) => {
    options?.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true });
  });
}

/** Bytes of a UTF-8 string. */
export function bytes(s: string): Uint8Array {
  return new TextEncoder().encode(s);
}

/** `n` bytes of value `v`. */
export function filled(n: number, v: number): Uint8Array {
  return new Uint8Array(n).fill(v);
}

export class StubMetadata implements MetadataAPI {
  selfValue: InstanceMetadata = {
    name: 'node-1',
    providerId: 'qemu:///hostname/node-1',
    role: 'Worker',
    vpcIp: '192.0.2.5',
  };
  selfAnswers: Array<InstanceMetadata | Error> = [];
  selfErr?: Error;
  /** The first this many self() calls hang until their signal aborts. */
  selfHangCount = 0;
  listValue: InstanceMetadata[] = [
    { name: 'cp-0', providerId: 'p0', role: 'ControlPlane', vpcIp: '192.0.2.10' },
  ];
  listAnswers: Array<InstanceMetadata[] | Error> = [];
  listErr?: Error;
  lbValue: Endpoint = { host: '198.51.100.1', port: '6443' };
  lbAnswers: Array<Endpoint | Error> = [];
  lbErr?: Error;
  initSecretHashValue = bytes('$2a$10$hash');
  initSecretHashErr?: Error;
  uidValue = '';
  calls: string[] = [];
  options: Array<CallOptions | undefined> = [];

  self(options?: CallOptions): Promise<InstanceMetadata> {
    this.calls.push('self');
    this.options.push(options);
    if (this.selfHangCount > 0) {
      this.selfHangCount--;
      return hang(options);
    }
    return answer(this.selfAnswers, this.selfErr, this.selfValue);
  }
  list(options?: CallOptions): Promise<InstanceMetadata[]> {
    this.calls.push('list');
    this.options.push(options);
    return answer(this.listAnswers, this.listErr, this.listValue);
  }
  getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint> {
    this.calls.push('getLoadBalancerEndpoint');
    this.options.push(options);
    return answer(this.lbAnswers, this.lbErr, this.lbValue);
  }
  initSecretHash(): Promise<Uint8Array> {
    this.calls.push('initSecretHash');
    return answer([], this.initSecretHashErr, this.initSecretHashValue);
  }
  uid(): Promise<string> {
    this.calls.push('uid');
    return Promise.resolve(this.uidValue);
  }
}

export class StubDisk implements EncryptedDisk {
  uuidValue = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0';
  openErr?: Error;
  uuidErr?: Error;
  updatePassphraseErr?: Error;
  markDiskForResetErr?: Error;
  releaseErr?: Error;
  opens = 0;
  releases = 0;
  passphrases: Uint8Array[] = [];
  resets = 0;
  calls: string[] = [];

  open(): Promise<() => Promise<void>> {
    this.calls.push('open');
    if (this.openErr) return Promise.reject(this.openErr);
    this.opens++;
    return Promise.resolve(() => {
      this.calls.push('release');
      this.releases++;
      return this.releaseErr ? Promise.reject(this.releaseErr) : Promise.resolve();
    });
  }
  uuid(): Promise<string> {
    this.calls.push('uuid');
    return answer([], this.uuidErr, this.uuidValue);
  }
  updatePassphrase(passphrase: Uint8Array): Promise<void> {
    this.calls.push('updatePassphrase');
    if (this.updatePassphraseErr) return Promise.reject(this.updatePassphraseErr);
    this.passphrases.push(passphrase);
    return Promise.resolve();
  }
  markDiskForReset(): Promise<void> {
    this.calls.push('markDiskForReset');
    if (this.markDiskForResetErr) return Promise.reject(this.markDiskForResetErr);
    this.resets++;
    return Promise.resolve();
  }
}

/** A complete, valid join ticket. */
export function validTicket(overrides: Partial<JoinTicket> = {}): JoinTicket {
  return {
    stateDiskKey: filled(32, 0x11),
    measurementSalt: filled(32, 0x22),
    measurementSecret: filled(32, 0x33),
    kubeletCert: bytes('-----BEGIN CERTIFICATE-----\n'),
    apiServerEndpoint: '192.0.2.10:6443',
    token: 'abcdef.0123456789abcdef',
    discoveryTokenCaCertHash: 'sha256:00ff',
    controlPlaneFiles: [
      { name: 'ca.key', data: bytes('ca key') },
      { name: 'etcd/ca.crt', data: bytes('etcd ca') },
    ],
    kubernetesVersion: '',
    kubernetesComponents: [
      { url: 'https://example.org/k', hash: 'sha256:aa', installPath: '/k', extract: false },
    ],
    authorizedCaPublicKey: new Uint8Array(0),
    hostCertificate: new Uint8Array(0),
    ...overrides,
  };
}

export class StubJoinTicketClient implements JoinTicketClient {
  ticketValue: JoinTicket = validTicket();
  ticketAnswers: Array<JoinTicket | Error> = [];
  issueJoinTicketErr?: Error;
  /** Endpoints for which issueJoinTicket hangs until aborted. */
  hangOn = new Set<string>();
  calls: Array<{ endpoint: string; request: JoinTicketRequest; options?: CallOptions }> = [];

  issueJoinTicket(endpoint: string, request: JoinTicketRequest, options?: CallOptions): Promise<JoinTicket> {
    this.calls.push({ endpoint, request, options });
    if (this.hangOn.has(endpoint)) return hang(options);
    return answer(this.ticketAnswers, this.issueJoinTicketErr, this.ticketValue);
  }
  issueRejoinTicket(_endpoint: string, _request: RejoinTicketRequest): Promise<RejoinTicket> {
    return Promise.reject(new Error('not used by these tests'));
  }
}

export class StubCsrFactory implements CsrFactory {
  createErr?: Error;
  calls: Array<{ nodeName: string; ips: string[] }> = [];

  create(nodeName: string, ips: string[]): Promise<KubeletCsr> {
    this.calls.push({ nodeName, ips });
    if (this.createErr) return Promise.reject(this.createErr);
    const n = this.calls.length;
    return Promise.resolve({ csrDer: bytes(`csr-${n}`), keyPem: bytes(`key-${n}`) });
  }
}

export class StubLock {
  acquired = true;
  tryLockOnceErr?: Error;
  calls: Uint8Array[] = [];

  tryLockOnce(clusterId: Uint8Array): Promise<{ acquired: boolean }> {
    this.calls.push(clusterId);
    if (this.tryLockOnceErr) return Promise.reject(this.tryLockOnceErr);
    return Promise.resolve({ acquired: this.acquired });
  }
}

export class StubMarker implements NodeMarker {
  markBootstrappedErr?: Error;
  calls: Uint8Array[] = [];

  async markBootstrapped(clusterId: Uint8Array): Promise<void> {
    this.calls.push(clusterId);
    // Yield, so concurrent lockers really interleave with a pending mark.
    await Promise.resolve();
    if (this.markBootstrappedErr) throw this.markBootstrappedErr;
  }
  isBootstrapped(): Promise<boolean> {
    return Promise.resolve(this.calls.length > 0);
  }
}

export class StubFileWriter implements FileWriter {
  /** Error for a given path. */
  errFor = new Map<string, Error>();
  written = new Map<string, Uint8Array>();

  writeExclusive(path: string, data: Uint8Array): Promise<void> {
    const err = this.errFor.get(path);
    if (err) return Promise.reject(err);
    if (this.written.has(path)) return Promise.reject(new Error(`${path} exists`));
    this.written.set(path, data);
    return Promise.resolve();
  }
}

export class StubNodeStateStore implements NodeStateStore {
  writeErr?: Error;
  states: NodeState[] = [];

  write(state: NodeState): Promise<void> {
    if (this.writeErr) return Promise.reject(this.writeErr);
    this.states.push(state);
    return Promise.resolve();
  }
  read(): Promise<NodeState | undefined> {
    return Promise.resolve(this.states[0]);
  }
}

export class StubJoiner implements ClusterJoiner {
  joinAnswers: Array<undefined | Error> = [];
  joinClusterErr?: Error;
  calls: Array<{ args: JoinClusterArgs; options?: CallOptions }> = [];

  joinCluster(args: JoinClusterArgs, options?: CallOptions): Promise<void> {
    this.calls.push({ args, options });
    return answer(this.joinAnswers, this.joinClusterErr, undefined);
  }
}

/** Random with a scripted queue of floats, then a constant. */
export class StubRandom implements Random {
  floats: number[] = [];
  floatValue = 0.5;
  floatCalls = 0;

  float(): number {
    this.floatCalls++;
    return this.floats.length > 0 ? this.floats.shift()! : this.floatValue;
  }
  bytes(n: number): Uint8Array {
    return new Uint8Array(n);
  }
}

/** Logger that records every event. */
export class RecordingLogger implements Logger {
  readonly events: Array<{ level: string; msg: string; fields?: Record<string, unknown> }>;

  constructor(events: Array<{ level: string; msg: string; fields?: Record<string, unknown> }> = []) {
    this.events = events;
  }
  debug(msg: string, fields?: Record<string, unknown>): void {
    this.events.push({ level: 'debug', msg, fields });
  }
  info(msg: string, fields?: Record<string, unknown>): void {
    this.events.push({ level: 'info', msg, fields });
  }
  warn(msg: string, fields?: Record<string, unknown>): void {
    this.events.push({ level: 'warn', msg, fields });
  }
  error(msg: string, fields?: Record<string, unknown>): void {
    this.events.push({ level: 'error', msg, fields });
  }
  child(): Logger {
    return new RecordingLogger(this.events);
  }
  /** Everything logged, as one string (to check that no secret leaked). */
  text(): string {
    return JSON.stringify(this.events);
  }
}

/** KMS that derives nothing: returns `length` bytes of a value per ID and records the IDs. */
export class StubKms implements KMS {
  getDataKeyErr?: Error;
  /** Error for a given data key ID. */
  errFor = new Map<string, Error>();
  calls: Array<{ dataKeyId: string; length: number }> = [];

  getDataKey(dataKeyId: string, length: number): Promise<Uint8Array> {
    this.calls.push({ dataKeyId, length });
    const err = this.errFor.get(dataKeyId) ?? this.getDataKeyErr;
    if (err) return Promise.reject(err);
    return Promise.resolve(StubKms.keyFor(dataKeyId, length));
  }
  /** The bytes this stub returns for `dataKeyId`. */
  static keyFor(dataKeyId: string, length: number): Uint8Array {
    const out = new Uint8Array(length);
    const id = bytes(dataKeyId);
    for (let i = 0; i < length; i++) out[i] = id[i % id.length]! ^ i;
    return out;
  }
}

export class StubKmsFactory implements KmsFactory {
  kms = new StubKms();
  fromUriErr?: Error;
  calls: Array<{ kmsUri: string; storageUri: string }> = [];

  fromUri(kmsUri: string, storageUri: string): Promise<KMS> {
    this.calls.push({ kmsUri, storageUri });
    return this.fromUriErr ? Promise.reject(this.fromUriErr) : Promise.resolve(this.kms);
  }
}

export class StubSecretHash implements SecretHash {
  /** The secret that matches; any other does not. */
  secret = bytes('init-secret');
  matchesErr?: Error;
  calls: Array<{ hash: Uint8Array; secret: Uint8Array }> = [];

  matches(hash: Uint8Array, secret: Uint8Array): Promise<boolean> {
    this.calls.push({ hash, secret });
    if (this.matchesErr) return Promise.reject(this.matchesErr);
    return Promise.resolve(Buffer.from(secret).equals(Buffer.from(this.secret)));
  }
}

export class StubInitializer implements ClusterInitializer {
  kubeconfig = bytes('apiVersion: v1\nkind: Config\n');
  initClusterErr?: Error;
  calls: Array<{ args: InitClusterArgs; options?: CallOptions }> = [];

  initCluster(args: InitClusterArgs, options?: CallOptions): Promise<Uint8Array> {
    this.calls.push({ args, options });
    return this.initClusterErr ? Promise.reject(this.initClusterErr) : Promise.resolve(this.kubeconfig);
  }
}

export class StubLogCollector implements LogCollector {
  logs = bytes('log line\n');
  collectErr?: Error;
  calls = 0;

  collect(): Promise<Uint8Array> {
    this.calls++;
    return this.collectErr ? Promise.reject(this.collectErr) : Promise.resolve(this.logs);
  }
}

/** A CA whose inspectCsr answer and failures the test sets. */
export class StubCa implements CertificateAuthority {
  /**
   * The inspectCsr answer. Without `subject`, the subject is derived the usual way: one RDN per
   * organization, then the common name.
   */
  csrInfo: Omit<CsrInfo, 'subject'> & { subject?: CsrInfo['subject'] } = {
    commonName: 'system:node:node-1',
    organizations: ['system:nodes'],
    ipAddresses: ['192.0.2.5'],
    dnsNames: [],
    signatureValid: true,
    // SHA-256 of the SubjectPublicKeyInfo of `cert` below (openssl): a CSR and the certificate
    // signed from it share their key.
    publicKeySha256: 'b2122d62a42874121370dbb0e529cb24c2ea2c168f41a43f708bb98e22b6be6f',
  };
  inspectCsrErr?: Error;
  signKubeletCsrErr?: Error;
  controlPlaneFilesErr?: Error;
  /** A real certificate (P-256, self-signed for system:node:node-1): the ticket issuer reads its key. */
  cert = bytes(
    [
      '-----BEGIN CERTIFICATE-----',
      'MIIBvjCCAWWgAwIBAgIUdTz3dOAbY+NKyR5bRMPVJKKaMPswCgYIKoZIzj0EAwIw',
      'NDEVMBMGA1UECgwMc3lzdGVtOm5vZGVzMRswGQYDVQQDDBJzeXN0ZW06bm9kZTpu',
      'b2RlLTEwIBcNMjYxMjA3MDY0NjI0WhgPMjEyNjExMTMwNjQ2MjRaMDQxFTATBgNV',
      'BAoMDHN5c3RlbTpub2RlczEbMBkGA1UEAwwSc3lzdGVtOm5vZGU6bm9kZS0xMFkw',
      'EwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEwowRtp8wYaSXR4nyAJKxgmmITMy7Tmbf',
      'wCt/BDzi5Jbq05vRfqkjMNkVSJB4jTISszUMMlKfTi0ReNlI0cRFx6NTMFEwHQYD',
      'VR0OBBYEFCQ5NC7spjJAKxBRilyEb6kj/edRMB8GA1UdIwQYMBaAFCQ5NC7spjJA',
      'KxBRilyEb6kj/edRMA8GA1UdEwEB/wQFMAMBAf8wCgYIKoZIzj0EAwIDRwAwRAIg',
      'KbW/yEVn6uVPOGDxpFZniyt3PIYKNaYcxBewCmD3Fq4CIHh4kITSDiODVN7xOYal',
      'OdS74fvn39raRKXJe5lrCbOg',
      '-----END CERTIFICATE-----',
    ].join('\n'),
  );
  files: ControlPlaneFile[] = [{ name: 'ca.crt', data: bytes('ca') }];
  calls: string[] = [];

  inspectCsr(_csrDer: Uint8Array): Promise<CsrInfo> {
    this.calls.push('inspectCsr');
    const info = this.csrInfo;
    const subject = info.subject ?? [
      ...info.organizations.map((value) => [{ type: 'O', value }]),
      [{ type: 'CN', value: info.commonName }],
    ];
    return answer([], this.inspectCsrErr, { ...info, subject });
  }
  /** The identities signKubeletCsr was asked to issue, in order. */
  signedFor: KubeletIdentity[] = [];
  signKubeletCsr(_csrDer: Uint8Array, identity: KubeletIdentity): Promise<Uint8Array> {
    this.calls.push('signKubeletCsr');
    this.signedFor.push(identity);
    return answer([], this.signKubeletCsrErr, this.cert);
  }
  controlPlaneFiles(): Promise<ControlPlaneFile[]> {
    this.calls.push('controlPlaneFiles');
    return answer([], this.controlPlaneFilesErr, this.files);
  }
}

/** Bootstrap tokens; records call order into a shared list. */
export class StubTokens implements BootstrapTokens {
  token = 'abcdef.0123456789abcdef';
  caHash = 'sha256:0123';
  createTokenErr?: Error;
  discoveryCaCertHashErr?: Error;
  ttls: number[] = [];

  constructor(readonly order: string[] = []) {}

  createToken(ttlMs: number): Promise<string> {
    this.order.push('createToken');
    this.ttls.push(ttlMs);
    return answer([], this.createTokenErr, this.token);
  }
  discoveryCaCertHash(): Promise<string> {
    this.order.push('discoveryCaCertHash');
    return answer([], this.discoveryCaCertHashErr, this.caHash);
  }
}

export class StubFacts implements ClusterFacts {
  componentsValue: Component[] = [
    { url: 'https://example.org/kubelet', hash: 'sha256:bb', installPath: '/kubelet', extract: false },
  ];
  componentsErr?: Error;
  addJoiningNodeErr?: Error;
  joiningNodes: Array<{ nodeName: string; isControlPlane: boolean; grant?: KubeletCredentialsGrant }> = [];

  components(): Promise<Component[]> {
    return answer([], this.componentsErr, this.componentsValue);
  }
  addJoiningNode(nodeName: string, isControlPlane: boolean, grant?: KubeletCredentialsGrant): Promise<void> {
    if (this.addJoiningNodeErr) return Promise.reject(this.addJoiningNodeErr);
    this.joiningNodes.push({ nodeName, isControlPlane, ...(grant ? { grant } : {}) });
    return Promise.resolve();
  }
}

/** Disk bindings in a Map (first writer wins); `err` makes every call fail (record unreadable). */
export class StubDiskBindings implements DiskBindings {
  readonly records = new Map<string, DiskBinding>();
  readonly calls: DiskBinding[] = [];
  err?: Error;
  bind(binding: DiskBinding): Promise<DiskBinding> {
    this.calls.push(binding);
    if (this.err) return Promise.reject(this.err);
    const existing = this.records.get(binding.diskUuid);
    if (existing) return Promise.resolve({ ...existing });
    this.records.set(binding.diskUuid, { ...binding });
    return Promise.resolve({ ...binding });
  }
  readonly releaseCalls: { owners: readonly string[]; keep: string }[] = [];
  /** `releaseErr` makes only the release fail. */
  releaseErr?: Error;
  releaseOthers(owners: readonly string[], keep: string): Promise<DiskBinding[]> {
    this.releaseCalls.push({ owners, keep });
    if (this.err ?? this.releaseErr) return Promise.reject(this.err ?? this.releaseErr);
    const released = [...this.records.values()].filter(
      (b) => b.diskUuid !== keep && owners.includes(b.owner),
    );
    for (const b of released) this.records.delete(b.diskUuid);
    return Promise.resolve(released);
  }
}

/** Fresh stubs for every dependency of a JoinFlow (shared by the join-flow test files). */
export function joinFlowStubs() {
  return {
    clock: new FakeClock(),
    metadata: new StubMetadata(),
    disk: new StubDisk(),
    joinClient: new StubJoinTicketClient(),
    csrFactory: new StubCsrFactory(),
    lock: new StubLock(),
    files: new StubFileWriter(),
    nodeState: new StubNodeStateStore(),
    joiner: new StubJoiner(),
    random: new StubRandom(),
    logger: new RecordingLogger(),
  };
}

/** Whether `p` settles without any fake time passing. */
export async function settlesWithoutTime(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void p.then(
    () => {
      settled = true;
    },
    () => {
      settled = true;
    },
  );
  for (let i = 0; i < 5 && !settled; i++) {
    await flushMicrotasks();
    await new Promise((r) => setImmediate(r));
  }
  return settled;
}
