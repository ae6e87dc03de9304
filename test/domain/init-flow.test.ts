/** The init flow (upstream's, with confboot's differences), with stubs for every port. */
import { describe, expect, it } from 'vitest';
import { isInitFailure } from '../../src/domain/errors.js';
import { InitFlow, type InitFlowOptions } from '../../src/domain/init-flow.js';
import { deriveClusterId } from '../../src/domain/key-derivation.js';
import { ConfbootError, type ConfbootErrorCode } from '../../src/ports/errors.js';
import type { InitRequest } from '../../src/ports/types.js';
import {
  bytes,
  filled,
  RecordingLogger,
  StubDisk,
  StubInitializer,
  StubKms,
  StubKmsFactory,
  StubLock,
  StubLogCollector,
  StubMetadata,
  StubNodeStateStore,
  StubSecretHash,
  someErr,
} from './stubs.js';

function request(overrides: Partial<InitRequest> = {}): InitRequest {
  return {
    kmsUri: 'kms://cluster-kms?key=a2V5&salt=c2FsdA',
    storageUri: 'storage://no-store',
    measurementSalt: filled(32, 0x5a),
    kubernetesVersion: 'v1.31.1',
    conformanceMode: false,
    kubernetesComponents: [
      { url: 'https://example.org/k', hash: 'sha256:aa', installPath: '/k', extract: true },
    ],
    initSecret: bytes('init-secret'),
    clusterName: 'demo',
    apiserverCertSans: ['203.0.113.7'],
    serviceCidr: '10.96.0.0/12',
    ...overrides,
  };
}

function setup() {
  const s = {
    metadata: new StubMetadata(),
    secretHash: new StubSecretHash(),
    kmsFactory: new StubKmsFactory(),
    lock: new StubLock(),
    disk: new StubDisk(),
    nodeState: new StubNodeStateStore(),
    initializer: new StubInitializer(),
    logCollector: new StubLogCollector(),
    logger: new RecordingLogger(),
    pointOfNoReturn: 0,
  };
  s.metadata.selfValue = { ...s.metadata.selfValue, name: 'control-plane-0', role: 'ControlPlane' };
  const flow = (options: InitFlowOptions = {}) =>
    new InitFlow(s, {
      onPointOfNoReturn: () => {
        s.pointOfNoReturn++;
      },
      ...options,
    });
  return { ...s, flow };
}
type Setup = ReturnType<typeof setup>;

interface InitCase {
  arrange?: (s: Setup) => void;
  req?: Partial<InitRequest>;
  options?: InitFlowOptions;
  /** undefined = success */
  wantCode?: ConfbootErrorCode;
  wantRecoverable?: boolean;
  wantKmsUsed: boolean;
  wantLock: boolean;
  wantMarkedForReset: boolean;
  wantLogs: boolean;
}

const cases: Record<string, InitCase> = {
  'successful init': { wantKmsUsed: true, wantLock: true, wantMarkedForReset: false, wantLogs: false },
  'wrong initSecret': {
    req: { initSecret: bytes('wrong') },
    wantCode: 'permission-denied',
    wantRecoverable: false,
    wantKmsUsed: false,
    wantLock: false,
    wantMarkedForReset: false,
    wantLogs: false,
  },
  'empty init secret hash': {
    arrange: (s) => {
      s.metadata.initSecretHashValue = new Uint8Array();
    },
    wantCode: 'failed-precondition',
    wantKmsUsed: false,
    wantLock: false,
    wantMarkedForReset: false,
    wantLogs: false,
  },
  'metadata error': {
    arrange: (s) => {
      s.metadata.initSecretHashErr = new ConfbootError('unavailable', 'metadata down');
    },
    wantCode: 'unavailable',
    wantRecoverable: true,
    wantKmsUsed: false,
    wantLock: false,
    wantMarkedForReset: false,
    wantLogs: false,
  },
  'secret hash check error': {
    arrange: (s) => {
      s.secretHash.matchesErr = someErr;
    },
    wantCode: 'internal',
    wantKmsUsed: false,
    wantLock: false,
    wantMarkedForReset: false,
    wantLogs: false,
  },
  'short measurement salt': {
    req: { measurementSalt: filled(16, 1) },
    wantCode: 'invalid-argument',
    wantKmsUsed: false,
    wantLock: false,
    wantMarkedForReset: false,
    wantLogs: true,
  },
  'kms setup error': {
    arrange: (s) => {
      s.kmsFactory.fromUriErr = new ConfbootError('invalid-argument', 'unsupported KMS URI');
    },
    wantCode: 'invalid-argument',
    wantKmsUsed: false,
    wantLock: false,
    wantMarkedForReset: false,
    wantLogs: true,
  },
  'measurement secret error': {
    arrange: (s) => {
      s.kmsFactory.kms.errFor.set('measurementSecret', new ConfbootError('unavailable', 'key service down'));
    },
    wantCode: 'unavailable',
    wantRecoverable: true,
    wantKmsUsed: true,
    wantLock: false,
    wantMarkedForReset: false,
    wantLogs: true,
  },
  'node locked': {
    arrange: (s) => {
      s.lock.acquired = false;
    },
    wantCode: 'failed-precondition',
    wantRecoverable: false,
    wantKmsUsed: true,
    wantLock: true,
    wantMarkedForReset: false,
    wantLogs: true,
  },
  'marking the node fails': {
    arrange: (s) => {
      s.lock.tryLockOnceErr = someErr;
    },
    wantCode: 'internal',
    wantRecoverable: false,
    wantKmsUsed: true,
    wantLock: true,
    wantMarkedForReset: true,
    wantLogs: true,
  },
  'disk open error': {
    arrange: (s) => {
      s.disk.openErr = someErr;
    },
    wantCode: 'internal',
    wantRecoverable: false,
    wantKmsUsed: true,
    wantLock: true,
    // Marking for reset needs the disk open, which fails again: logged, not hidden.
    wantMarkedForReset: false,
    wantLogs: true,
  },
  'disk uuid error': {
    arrange: (s) => {
      s.disk.uuidErr = someErr;
    },
    wantCode: 'internal',
    wantRecoverable: false,
    wantKmsUsed: true,
    wantLock: true,
    wantMarkedForReset: true,
    wantLogs: true,
  },
  'disk key error': {
    arrange: (s) => {
      s.kmsFactory.kms.errFor.set(s.disk.uuidValue, new ConfbootError('unavailable', 'key service down'));
    },
    wantCode: 'unavailable',
    wantRecoverable: false,
    wantKmsUsed: true,
    wantLock: true,
    wantMarkedForReset: true,
    wantLogs: true,
  },
  'disk update passphrase error': {
    arrange: (s) => {
      s.disk.updatePassphraseErr = someErr;
    },
    wantCode: 'internal',
    wantRecoverable: false,
    wantKmsUsed: true,
    wantLock: true,
    wantMarkedForReset: true,
    wantLogs: true,
  },
  'write state file error': {
    arrange: (s) => {
      s.nodeState.writeErr = someErr;
    },
    wantCode: 'internal',
    wantRecoverable: false,
    wantKmsUsed: true,
    wantLock: true,
    wantMarkedForReset: true,
    wantLogs: true,
  },
  'initialize cluster error': {
    arrange: (s) => {
      s.initializer.initClusterErr = new ConfbootError('unavailable', 'kubeadm init failed');
    },
    wantCode: 'unavailable',
    wantRecoverable: false,
    wantKmsUsed: true,
    wantLock: true,
    wantMarkedForReset: true,
    wantLogs: true,
  },
  'point-of-no-return callback error': {
    options: {
      onPointOfNoReturn: () => {
        throw someErr;
      },
    },
    wantCode: 'internal',
    wantRecoverable: false,
    wantKmsUsed: true,
    wantLock: true,
    wantMarkedForReset: true,
    wantLogs: true,
  },
};

describe('InitFlow', () => {
  it.each(Object.entries(cases))('%s', async (_name, tc) => {
    const s = setup();
    tc.arrange?.(s);
    const got = await s
      .flow(tc.options)
      .init(request(tc.req))
      .then(
        (ok) => ({ ok, err: undefined }),
        (err: unknown) => ({ ok: undefined, err }),
      );

    if (tc.wantCode === undefined) {
      expect(got.err).toBeUndefined();
      expect(got.ok?.result.kubeconfig).toEqual(s.initializer.kubeconfig);
    } else {
      expect(isInitFailure(got.err)).toBe(true);
      if (!isInitFailure(got.err)) return;
      expect(got.err.code).toBe(tc.wantCode);
      if (tc.wantRecoverable !== undefined) expect(got.err.recoverable).toBe(tc.wantRecoverable);
      expect(got.err.diskMarkedForReset).toBe(tc.wantMarkedForReset);
      expect(got.err.logChunks.length > 0).toBe(tc.wantLogs);
      expect(s.logCollector.calls > 0).toBe(tc.wantLogs);
    }
    expect(s.kmsFactory.kms.calls.length > 0).toBe(tc.wantKmsUsed);
    expect(s.lock.calls.length > 0).toBe(tc.wantLock);
    expect(s.disk.resets > 0).toBe(tc.wantMarkedForReset);
    expect(s.disk.releases).toBe(s.disk.opens);
  });

  it('wrong initSecret: no KMS is set up and no key is used', async () => {
    const s = setup();
    await s
      .flow()
      .init(request({ initSecret: bytes('guess') }))
      .catch(() => undefined);
    expect(s.kmsFactory.calls).toEqual([]);
    expect(s.kmsFactory.kms.calls).toEqual([]);
    expect(s.secretHash.calls).toEqual([{ hash: s.metadata.initSecretHashValue, secret: bytes('guess') }]);
  });

  it('node locked: says "node is already being activated" and touches nothing', async () => {
    const s = setup();
    s.lock.acquired = false;
    const err = await s
      .flow()
      .init(request())
      .catch((e: unknown) => e);
    expect((err as Error).message).toBe('node is already being activated');
    expect(s.disk.calls).toEqual([]);
    expect(s.nodeState.states).toEqual([]);
    expect(s.pointOfNoReturn).toBe(0);
  });

  it.each([
    ['lower case uuid', 'abcdef01-2345-6789-abcd-ef0123456789'],
    ['upper case uuid', 'ABCDEF01-2345-6789-ABCD-EF0123456789'],
  ])('%s: derives the disk key for the lower-cased UUID', async (_name, uuid) => {
    const s = setup();
    s.disk.uuidValue = uuid;
    await s.flow().init(request());
    expect(s.kmsFactory.kms.calls).toEqual([
      { dataKeyId: 'measurementSecret', length: 32 },
      { dataKeyId: 'abcdef01-2345-6789-abcd-ef0123456789', length: 32 },
    ]);
    expect(s.disk.passphrases).toEqual([StubKms.keyFor('abcdef01-2345-6789-abcd-ef0123456789', 32)]);
  });

  it('sets up the KMS from the request URIs', async () => {
    const s = setup();
    await s.flow().init(request());
    expect(s.kmsFactory.calls).toEqual([{ kmsUri: request().kmsUri, storageUri: 'storage://no-store' }]);
  });

  it('locks with and returns the cluster ID from the measurement secret and the request’s salt', async () => {
    const s = setup();
    const { result } = await s.flow().init(request());
    const want = deriveClusterId(StubKms.keyFor('measurementSecret', 32), request().measurementSalt);
    expect(s.lock.calls).toEqual([want]);
    expect(result.clusterId).toEqual(want);
  });

  it('runs the point-of-no-return callback once, after the lock and before the disk', async () => {
    const s = setup();
    const seen: string[] = [];
    await s
      .flow({
        onPointOfNoReturn: () => void seen.push(`locks ${s.lock.calls.length}, disk ${s.disk.calls.length}`),
      })
      .init(request());
    expect(seen).toEqual(['locks 1, disk 0']);
  });

  it('writes the node state as control plane with the request’s measurement salt', async () => {
    const s = setup();
    await s.flow().init(request());
    expect(s.nodeState.states).toEqual([
      { role: 'ControlPlane', measurementSalt: request().measurementSalt },
    ]);
  });

  it('initialises the cluster with the request and this node’s name and IP', async () => {
    const s = setup();
    await s.flow({ initClusterTimeoutMs: 600_000 }).init(request());
    expect(s.initializer.calls).toEqual([
      {
        args: {
          kubernetesVersion: 'v1.31.1',
          clusterName: 'demo',
          conformanceMode: false,
          components: request().kubernetesComponents,
          apiserverCertSans: ['203.0.113.7', '192.0.2.5', '198.51.100.1'],
          serviceCidr: '10.96.0.0/12',
          nodeName: 'control-plane-0',
          nodeIp: '192.0.2.5',
          controlPlaneEndpoint: '198.51.100.1:6443',
          providerId: 'qemu:///hostname/node-1',
        },
        options: { timeoutInMs: 600_000 },
      },
    ]);
  });

  it('on a cloud without a load balancer: no controlPlaneEndpoint, a warning, and the init goes on', async () => {
    const s = setup();
    s.metadata.lbErr = new ConfbootError('failed-precondition', 'no load balancer');
    s.metadata.selfValue = { ...s.metadata.selfValue, providerId: '' };
    await s.flow().init(request());
    const args = s.initializer.calls[0]?.args;
    expect(args?.controlPlaneEndpoint).toBeUndefined();
    expect(args?.providerId).toBeUndefined();
    expect(args?.apiserverCertSans).toEqual(['203.0.113.7', '192.0.2.5']);
    expect(
      s.logger.events.some((e) => e.level === 'warn' && /further control planes cannot join/.test(e.msg)),
    ).toBe(true);
  });

  it('metadata that cannot answer for the load balancer stops the init before the lock', async () => {
    const s = setup();
    s.metadata.lbErr = new ConfbootError('unavailable', 'metadata server down');
    await expect(s.flow().init(request())).rejects.toThrow('init: getting the load balancer endpoint');
    expect(s.initializer.calls).toEqual([]);
  });

  it('uses cluster name "constellation" when the request has none', async () => {
    const s = setup();
    await s.flow().init(request({ clusterName: '' }));
    expect(s.initializer.calls[0]?.args.clusterName).toBe('constellation');
  });

  it('refuses to init before metadata names the node', async () => {
    const s = setup();
    s.metadata.selfValue = { ...s.metadata.selfValue, name: '' };
    const err = await s
      .flow()
      .init(request())
      .catch((e: unknown) => e);
    expect(isInitFailure(err) && err.code).toBe('unavailable');
    expect(s.lock.calls).toEqual([]);
  });

  it('splits the collected logs into chunks of at most 1024 bytes', async () => {
    const s = setup();
    s.nodeState.writeErr = someErr;
    s.logCollector.logs = filled(2500, 0x41);
    const err = await s
      .flow()
      .init(request())
      .catch((e: unknown) => e);
    expect(isInitFailure(err) && err.logChunks.map((c) => c.length)).toEqual([1024, 1024, 452]);
    expect(isInitFailure(err) && Buffer.concat(err.logChunks).equals(Buffer.from(filled(2500, 0x41)))).toBe(
      true,
    );
  });

  it('fail collection: still reports the init failure, without logs', async () => {
    const s = setup();
    s.nodeState.writeErr = someErr;
    s.logCollector.collectErr = new Error('journald down');
    const err = await s
      .flow()
      .init(request())
      .catch((e: unknown) => e);
    expect(isInitFailure(err) && err.message).toContain('writing node state');
    expect(isInitFailure(err) && err.logChunks).toEqual([]);
    expect(s.logger.text()).toContain('journald down');
  });

  it('a failed reset is logged and the original failure reported', async () => {
    const s = setup();
    s.initializer.initClusterErr = someErr;
    s.disk.markDiskForResetErr = new Error('token write failed');
    const err = await s
      .flow()
      .init(request())
      .catch((e: unknown) => e);
    expect(isInitFailure(err) && err.message).toContain('initializing Kubernetes cluster');
    expect(isInitFailure(err) && err.diskMarkedForReset).toBe(false);
    expect(
      s.logger.events.some((e) => e.level === 'error' && e.msg === 'Failed to mark state disk for reset'),
    ).toBe(true);
  });

  it('the failure keeps its cause chain', async () => {
    const s = setup();
    s.initializer.initClusterErr = someErr;
    const err = await s
      .flow()
      .init(request())
      .catch((e: unknown) => e);
    let cause: unknown = err;
    const chain: unknown[] = [];
    while (cause instanceof Error) {
      chain.push(cause);
      cause = cause.cause;
    }
    expect(chain).toContain(someErr);
  });

  it('never logs the init secret or a key', async () => {
    const s = setup();
    s.initializer.initClusterErr = someErr;
    await s
      .flow()
      .init(request())
      .catch(() => undefined);
    await s
      .flow()
      .init(request({ initSecret: bytes('wrong-secret') }))
      .catch(() => undefined);
    const text = s.logger.text();
    expect(text).not.toContain('init-secret');
    expect(text).not.toContain('wrong-secret');
    expect(text).not.toContain(Buffer.from(StubKms.keyFor('measurementSecret', 32)).toString('hex'));
  });
});
