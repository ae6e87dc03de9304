/**
 * The join flow (upstream's, with confboot's differences) under fake time, with stubs for every port.
 * kubeadm, metadata and the join service are stubs here; the flow's rules are what is tested.
 */
import { describe, expect, it } from 'vitest';
import {
  DISK_READ_ATTEMPTS,
  JoinFlow,
  type JoinFlowOptions,
  type JoinFlowOutcome,
} from '../../src/domain/join-flow.js';
import { DEFAULT_JOIN_PATHS } from '../../src/domain/join-ticket-apply.js';
import { deriveClusterId } from '../../src/domain/key-derivation.js';
import { isConfbootError } from '../../src/ports/errors.js';
import type { InstanceMetadata, Role } from '../../src/ports/types.js';
import { flushMicrotasks } from '../fakes/fake-clock.js';
import { bytes, joinFlowStubs, settlesWithoutTime, someErr, validTicket } from './stubs.js';

/** A deadline no test reaches unless a call hangs; lets backoff sleeps be told apart from timers. */
const TIMEOUT = 600_000;
const LB = '198.51.100.1:30090';
const CERT_PATH = '/run/state/kubelet/pki/kubelet-client-crt.pem';
const KEY_PATH = '/run/state/kubelet/pki/kubelet-client-key.pem';

function setup(role: Role = 'Worker') {
  const s = {
    ...joinFlowStubs(),
    pointOfNoReturn: 0,
  };
  s.metadata.selfValue = { ...s.metadata.selfValue, role };
  const flow = (options: JoinFlowOptions = {}) =>
    new JoinFlow(s, {
      timeouts: { metadataMs: TIMEOUT, joinTicketMs: TIMEOUT, joinClusterMs: TIMEOUT },
      onPointOfNoReturn: () => {
        s.pointOfNoReturn++;
      },
      ...options,
    });
  return { ...s, flow };
}
type Setup = ReturnType<typeof setup>;

/** Runs the flow to its end under fake time. */
async function runToEnd(s: Setup, flow: JoinFlow): Promise<{ outcome?: JoinFlowOutcome; err?: unknown }> {
  return s.clock.runUntil(
    flow.run().then(
      (outcome) => ({ outcome }),
      (err: unknown) => ({ err }),
    ),
  );
}

const backoffSleeps = (s: Setup) => s.clock.sleeps.filter((ms) => ms !== TIMEOUT);
const cp = (name: string, vpcIp: string): InstanceMetadata => ({
  name,
  providerId: name,
  role: 'ControlPlane',
  vpcIp,
});

interface JoinCase {
  role: Role;
  arrange?: (s: Setup) => void;
  wantOutcome?: JoinFlowOutcome['outcome'];
  /** The run rejects; `false` = not recoverable. */
  wantErrRecoverable?: boolean;
  wantLock: boolean;
  wantJoinCalls: number;
  /** Paths written. */
  wantFiles: string[];
}

const workerFiles = [CERT_PATH, KEY_PATH];
const cpFiles = ['/etc/kubernetes/pki/ca.key', '/etc/kubernetes/pki/etcd/ca.crt', CERT_PATH, KEY_PATH];

const cases: Record<string, JoinCase> = {
  'on worker: success': {
    role: 'Worker',
    wantOutcome: 'joined',
    wantLock: true,
    wantJoinCalls: 1,
    wantFiles: workerFiles,
  },
  'on worker: metadata self: errors occur': {
    role: 'Worker',
    arrange: (s) => {
      s.metadata.selfAnswers = [someErr, someErr, someErr];
    },
    wantOutcome: 'joined',
    wantLock: true,
    wantJoinCalls: 1,
    wantFiles: workerFiles,
  },
  'on worker: metadata self: invalid answer': {
    role: 'Worker',
    arrange: (s) => {
      const self = s.metadata.selfValue;
      s.metadata.selfAnswers = [
        { ...self, name: '' },
        { ...self, role: 'Unknown' },
        { ...self, role: 'bogus' as Role },
      ];
    },
    wantOutcome: 'joined',
    wantLock: true,
    wantJoinCalls: 1,
    wantFiles: workerFiles,
  },
  'on worker: metadata list: errors occur': {
    role: 'Worker',
    arrange: (s) => {
      s.metadata.lbErr = someErr;
      s.metadata.listAnswers = [someErr, someErr];
    },
    wantOutcome: 'joined',
    wantLock: true,
    wantJoinCalls: 1,
    wantFiles: workerFiles,
  },
  'on worker: metadata list: no control plane nodes in answer': {
    role: 'Worker',
    arrange: (s) => {
      s.metadata.lbErr = someErr;
      s.metadata.listAnswers = [[{ ...cp('w', '192.0.2.9'), role: 'Worker' }], [cp('cp-x', '')], []];
    },
    wantOutcome: 'joined',
    wantLock: true,
    wantJoinCalls: 1,
    wantFiles: workerFiles,
  },
  'on worker: issueJoinTicket errors': {
    role: 'Worker',
    arrange: (s) => {
      s.joinClient.ticketAnswers = [someErr, someErr, someErr];
    },
    wantOutcome: 'joined',
    wantLock: true,
    wantJoinCalls: 1,
    wantFiles: workerFiles,
  },
  'on control plane: issueJoinTicket errors': {
    role: 'ControlPlane',
    arrange: (s) => {
      s.joinClient.ticketAnswers = [someErr, someErr, someErr];
    },
    wantOutcome: 'joined',
    wantLock: true,
    wantJoinCalls: 1,
    wantFiles: cpFiles,
  },
  'on control plane: joinCluster fails': {
    role: 'ControlPlane',
    arrange: (s) => {
      s.joiner.joinClusterErr = someErr;
    },
    wantErrRecoverable: false,
    wantLock: true,
    wantJoinCalls: 3,
    wantFiles: cpFiles,
  },
  'on control plane: joinCluster fails transiently': {
    role: 'ControlPlane',
    arrange: (s) => {
      s.joiner.joinAnswers = [someErr];
    },
    wantOutcome: 'joined',
    wantLock: true,
    wantJoinCalls: 2,
    wantFiles: cpFiles,
  },
  'on control plane: node already locked': {
    role: 'ControlPlane',
    arrange: (s) => {
      s.lock.acquired = false;
    },
    wantOutcome: 'init-in-progress',
    wantLock: true,
    wantJoinCalls: 0,
    wantFiles: [],
  },
  'on control plane: disk open fails': {
    role: 'ControlPlane',
    arrange: (s) => {
      s.disk.openErr = someErr;
    },
    wantErrRecoverable: false,
    wantLock: false,
    wantJoinCalls: 0,
    wantFiles: [],
  },
  'on control plane: disk uuid fails': {
    role: 'ControlPlane',
    arrange: (s) => {
      s.disk.uuidErr = someErr;
    },
    wantErrRecoverable: false,
    wantLock: false,
    wantJoinCalls: 0,
    wantFiles: [],
  },
  'on control plane: marking the node fails': {
    role: 'ControlPlane',
    arrange: (s) => {
      s.lock.tryLockOnceErr = someErr;
    },
    wantErrRecoverable: false,
    wantLock: true,
    wantJoinCalls: 0,
    wantFiles: [],
  },
  'on control plane: disk update passphrase fails': {
    role: 'ControlPlane',
    arrange: (s) => {
      s.disk.updatePassphraseErr = someErr;
    },
    wantErrRecoverable: false,
    wantLock: true,
    wantJoinCalls: 0,
    wantFiles: [],
  },
  'on control plane: writing a control-plane file fails': {
    role: 'ControlPlane',
    arrange: (s) => {
      s.files.errFor.set('/etc/kubernetes/pki/etcd/ca.crt', someErr);
    },
    wantErrRecoverable: false,
    wantLock: true,
    wantJoinCalls: 0,
    wantFiles: ['/etc/kubernetes/pki/ca.key'],
  },
  'on worker: writing the kubelet key fails': {
    role: 'Worker',
    arrange: (s) => {
      s.files.errFor.set(KEY_PATH, someErr);
    },
    wantErrRecoverable: false,
    wantLock: true,
    wantJoinCalls: 0,
    wantFiles: [CERT_PATH],
  },
  'on worker: writing node state fails': {
    role: 'Worker',
    arrange: (s) => {
      s.nodeState.writeErr = someErr;
    },
    wantErrRecoverable: false,
    wantLock: true,
    wantJoinCalls: 0,
    wantFiles: workerFiles,
  },
};

describe('JoinFlow', () => {
  it.each(Object.entries(cases))('%s', async (_name, tc) => {
    const s = setup(tc.role);
    tc.arrange?.(s);
    const { outcome, err } = await runToEnd(s, s.flow());

    if (tc.wantErrRecoverable === undefined) {
      expect(err).toBeUndefined();
      expect(outcome?.outcome).toBe(tc.wantOutcome);
    } else {
      expect(isConfbootError(err)).toBe(true);
      expect(isConfbootError(err) && err.recoverable).toBe(tc.wantErrRecoverable);
    }
    expect(s.lock.calls.length > 0).toBe(tc.wantLock);
    expect(s.joiner.calls).toHaveLength(tc.wantJoinCalls);
    expect([...s.files.written.keys()]).toEqual(tc.wantFiles);
    expect(s.disk.releases).toBe(s.disk.opens);
  });

  it('on control plane: node already locked: touches neither the disk nor the node state', async () => {
    const s = setup('ControlPlane');
    s.lock.acquired = false;
    await runToEnd(s, s.flow());
    expect(s.disk.passphrases).toEqual([]);
    expect(s.nodeState.states).toEqual([]);
    expect(s.pointOfNoReturn).toBe(0);
  });

  it('on control plane: disk open fails: asks no join service', async () => {
    const s = setup('ControlPlane');
    s.disk.openErr = someErr;
    const { err } = await runToEnd(s, s.flow());
    expect((err as Error).message).toContain('opening state disk');
    expect(s.joinClient.calls).toEqual([]);
  });

  it('on control plane: disk open fails transiently: retries with backoff and joins', async () => {
    const s = setup('ControlPlane');
    const open = s.disk.open.bind(s.disk);
    let failures = 2;
    s.disk.open = async () => {
      if (failures-- > 0) throw someErr;
      return open();
    };
    const { outcome } = await runToEnd(s, s.flow());
    expect(outcome).toEqual({ outcome: 'joined' });
  });

  it('on control plane: disk open keeps failing: gives up after DISK_READ_ATTEMPTS without touching anything', async () => {
    const s = setup('ControlPlane');
    let opens = 0;
    s.disk.open = async () => {
      opens++;
      throw someErr;
    };
    const { err } = await runToEnd(s, s.flow());
    expect((err as Error).message).toContain('opening state disk');
    expect(opens).toBe(DISK_READ_ATTEMPTS);
    expect(s.joinClient.calls).toEqual([]);
  });

  it.each([
    ['upper case uuid', 'ABCDEF01-2345-6789-ABCD-EF0123456789'],
    ['lower case uuid', 'abcdef01-2345-6789-abcd-ef0123456789'],
  ])('%s: sends the lower-cased disk UUID', async (_name, uuid) => {
    const s = setup();
    s.disk.uuidValue = uuid;
    await runToEnd(s, s.flow());
    expect(s.joinClient.calls[0]?.request.diskUuid).toBe('abcdef01-2345-6789-abcd-ef0123456789');
  });

  it('tries the load balancer first, then every control plane, on port 30090', async () => {
    const s = setup();
    s.metadata.listValue = [
      cp('cp-0', '10.0.0.1'),
      { ...cp('w-0', '10.0.0.9'), role: 'Worker' },
      cp('cp-1', '10.0.0.2'),
      cp('cp-x', ''),
      cp('cp-2', '10.0.0.3'),
    ];
    s.random.floats = [0];
    s.joinClient.ticketAnswers = [someErr, someErr, someErr, someErr];
    await runToEnd(s, s.flow());
    expect(s.joinClient.calls.map((c) => c.endpoint).slice(0, 5)).toEqual([
      LB,
      '10.0.0.1:30090',
      '10.0.0.2:30090',
      '10.0.0.3:30090',
      LB,
    ]);
  });

  it('starts at a random index in the control-plane list', async () => {
    const s = setup();
    s.metadata.lbErr = someErr;
    s.metadata.listValue = [cp('cp-0', '10.0.0.1'), cp('cp-1', '10.0.0.2'), cp('cp-2', '10.0.0.3')];
    s.random.floats = [0.7];
    s.joinClient.ticketAnswers = [someErr, someErr];
    await runToEnd(s, s.flow());
    expect(s.joinClient.calls.map((c) => c.endpoint)).toEqual([
      '10.0.0.3:30090',
      '10.0.0.1:30090',
      '10.0.0.2:30090',
    ]);
  });

  it('tolerates a failed load balancer lookup', async () => {
    const s = setup();
    s.metadata.lbErr = someErr;
    const { outcome } = await runToEnd(s, s.flow());
    expect(outcome?.outcome).toBe('joined');
    expect(s.joinClient.calls.map((c) => c.endpoint)).toEqual(['192.0.2.10:30090']);
  });

  it('retries when there is no endpoint at all', async () => {
    const s = setup();
    s.metadata.lbAnswers = [someErr, someErr];
    s.metadata.listAnswers = [someErr, []];
    const { outcome } = await runToEnd(s, s.flow());
    expect(outcome?.outcome).toBe('joined');
    expect(backoffSleeps(s)).toHaveLength(2);
    expect(s.joinClient.calls).toHaveLength(1);
  });

  it('uses the configured port and brackets IPv6 addresses', async () => {
    const s = setup();
    s.metadata.lbValue = { host: '2001:db8::1', port: '6443' };
    await runToEnd(s, s.flow({ joinServicePort: 9090 }));
    expect(s.joinClient.calls[0]?.endpoint).toBe('[2001:db8::1]:9090');
  });

  it('makes a new CSR for every attempt, for the node name and VPC IP', async () => {
    const s = setup();
    s.joinClient.ticketAnswers = [someErr, someErr];
    await runToEnd(s, s.flow());
    expect(s.csrFactory.calls).toEqual([
      { nodeName: 'node-1', ips: ['192.0.2.5'] },
      { nodeName: 'node-1', ips: ['192.0.2.5'] },
      { nodeName: 'node-1', ips: ['192.0.2.5'] },
    ]);
    const csrs = s.joinClient.calls.map((c) => Buffer.from(c.request.certificateRequest).toString());
    expect(new Set(csrs).size).toBe(3);
    // The key written is the one of the CSR that got the ticket.
    expect(Buffer.from(s.files.written.get(KEY_PATH)!).toString()).toBe('key-3');
  });

  it('sends no IP SANs when the node has no VPC IP', async () => {
    const s = setup();
    s.metadata.selfValue = { ...s.metadata.selfValue, vpcIp: '' };
    await runToEnd(s, s.flow());
    expect(s.csrFactory.calls[0]?.ips).toEqual([]);
    expect(s.joiner.calls[0]?.args.nodeIp).toBe('');
  });

  it('asks as control plane only when the role is ControlPlane', async () => {
    const w = setup('Worker');
    await runToEnd(w, w.flow());
    const c = setup('ControlPlane');
    await runToEnd(c, c.flow());
    expect([
      w.joinClient.calls[0]?.request.isControlPlane,
      c.joinClient.calls[0]?.request.isControlPlane,
    ]).toEqual([false, true]);
  });

  it('backoff grows and is capped', async () => {
    const s = setup();
    s.metadata.selfAnswers = Array.from({ length: 7 }, () => someErr);
    s.random.floatValue = 0.5;
    await runToEnd(s, s.flow({ backoff: { initialMs: 100, maxMs: 1000 } }));
    expect(backoffSleeps(s)).toEqual([50, 100, 200, 400, 500, 500, 500]);
  });

  it('jitter uses Random', async () => {
    const s = setup();
    s.joinClient.ticketAnswers = [someErr, someErr];
    s.metadata.lbErr = someErr;
    s.random.floats = [0, 0, 0, 0.25];
    await runToEnd(s, s.flow({ backoff: { initialMs: 100, maxMs: 1000 } }));
    // start index, jitter 0 of 100 ms, start index, jitter 0.25 of 200 ms
    expect(backoffSleeps(s)).toEqual([0, 50]);
  });

  it('passes a deadline to every metadata and join service call', async () => {
    const s = setup();
    await runToEnd(s, s.flow({ timeouts: { metadataMs: 1111, joinTicketMs: 2222, joinClusterMs: 3333 } }));
    expect(new Set(s.metadata.options.map((o) => o?.timeoutInMs))).toEqual(new Set([1111]));
    expect(s.joinClient.calls[0]?.options?.timeoutInMs).toBe(2222);
    expect(s.joiner.calls[0]?.options?.timeoutInMs).toBe(3333);
  });

  it('gives up on a metadata call that does not answer in time and retries', async () => {
    const s = setup();
    s.metadata.selfHangCount = 1;
    const { outcome } = await runToEnd(s, s.flow());
    expect(outcome?.outcome).toBe('joined');
    expect(s.metadata.calls.filter((c) => c === 'self')).toHaveLength(2);
    expect(s.metadata.options[0]?.signal?.aborted).toBe(true);
  });

  it('stop() ends the loop promptly while it waits to retry', async () => {
    const s = setup();
    s.metadata.selfErr = someErr;
    const flow = s.flow();
    const run = flow.run();
    await flushMicrotasks();
    expect(s.clock.pending).toBe(1);
    flow.stop();
    expect(await settlesWithoutTime(run)).toBe(true);
    await expect(run).resolves.toEqual({ outcome: 'stopped' });
    expect(s.clock.pending).toBe(0);
    expect(s.lock.calls).toEqual([]);
  });

  it('stop() ends the loop promptly during a join ticket call that hangs', async () => {
    const s = setup();
    s.joinClient.hangOn.add(LB);
    const flow = s.flow();
    const run = flow.run();
    for (let i = 0; i < 5 && s.joinClient.calls.length === 0; i++) await flushMicrotasks();
    expect(s.joinClient.calls).toHaveLength(1);
    flow.stop();
    expect(await settlesWithoutTime(run)).toBe(true);
    await expect(run).resolves.toEqual({ outcome: 'stopped' });
    expect(s.joinClient.calls[0]?.options?.signal?.aborted).toBe(true);
    expect(s.lock.calls).toEqual([]);
    expect(s.files.written.size).toBe(0);
  });

  it('stop() before run() makes run() resolve stopped without touching anything', async () => {
    const s = setup();
    const flow = s.flow();
    flow.stop();
    await expect(flow.run()).resolves.toEqual({ outcome: 'stopped' });
    expect(s.disk.calls).toEqual([]);
    expect(s.metadata.calls).toEqual([]);
  });

  it('stop() after the node lock lets the join finish', async () => {
    const s = setup();
    const flow: JoinFlow = s.flow({ onPointOfNoReturn: () => flow.stop() });
    const { outcome } = await runToEnd(s, flow);
    expect(outcome?.outcome).toBe('joined');
    expect(flow.stopped).toBe(true);
  });

  it('run() can run only once', async () => {
    const s = setup();
    const flow = s.flow();
    await runToEnd(s, flow);
    await expect(flow.run()).rejects.toThrow('already');
  });

  it('locks with the cluster ID derived from the ticket', async () => {
    const s = setup();
    await runToEnd(s, s.flow());
    const t = s.joinClient.ticketValue;
    expect(s.lock.calls).toEqual([deriveClusterId(t.measurementSecret, t.measurementSalt)]);
  });

  it('runs the point-of-no-return callback once, after the lock and before the disk', async () => {
    const s = setup();
    const order: string[] = [];
    const lockOnce = s.lock.tryLockOnce.bind(s.lock);
    s.lock.tryLockOnce = (id) => {
      order.push('lock');
      return lockOnce(id);
    };
    const flow = s.flow({
      onPointOfNoReturn: () => {
        order.push(
          `callback, disk calls so far: ${s.disk.calls.filter((c) => c === 'updatePassphrase').length}`,
        );
      },
    });
    await runToEnd(s, flow);
    expect(order).toEqual(['lock', 'callback, disk calls so far: 0']);
  });

  it('a failing point-of-no-return callback is final', async () => {
    const s = setup();
    const { err } = await runToEnd(
      s,
      s.flow({
        onPointOfNoReturn: () => {
          throw someErr;
        },
      }),
    );
    expect(isConfbootError(err) && err.recoverable).toBe(false);
    expect(s.disk.passphrases).toEqual([]);
  });

  it('sets the state disk passphrase to the ticket’s state disk key', async () => {
    const s = setup();
    await runToEnd(s, s.flow());
    expect(s.disk.passphrases).toEqual([s.joinClient.ticketValue.stateDiskKey]);
    expect(s.disk.opens).toBe(2);
    expect(s.disk.releases).toBe(2);
  });

  it('writes the files under the configured paths with the ticket’s contents', async () => {
    const s = setup('ControlPlane');
    await runToEnd(
      s,
      s.flow({ paths: { pkiDir: '/pki/', kubeletCertPath: '/k/cert.pem', kubeletKeyPath: '/k/key.pem' } }),
    );
    const text = (p: string) => Buffer.from(s.files.written.get(p) ?? new Uint8Array()).toString();
    expect([...s.files.written.keys()]).toEqual([
      '/pki/ca.key',
      '/pki/etcd/ca.crt',
      '/k/cert.pem',
      '/k/key.pem',
    ]);
    expect([text('/pki/ca.key'), text('/k/cert.pem'), text('/k/key.pem')]).toEqual([
      'ca key',
      '-----BEGIN CERTIFICATE-----\n',
      'key-1',
    ]);
  });

  it('on worker: ignores control-plane files in the ticket', async () => {
    const s = setup('Worker');
    s.joinClient.ticketValue = validTicket({
      controlPlaneFiles: [{ name: '../../etc/shadow', data: bytes('x') }],
    });
    const { outcome } = await runToEnd(s, s.flow());
    expect(outcome?.outcome).toBe('joined');
    expect([...s.files.written.keys()]).toEqual(workerFiles);
  });

  it.each(['../x', '/etc/passwd', 'etcd/../../x', 'apiserver.key', 'ca.key ', 'CA.KEY', ''])(
    'on control plane: refuses a ticket with control-plane file %j before the lock and tries the next endpoint',
    async (name) => {
      const s = setup('ControlPlane');
      s.joinClient.ticketAnswers = [validTicket({ controlPlaneFiles: [{ name, data: bytes('evil') }] })];
      const { outcome } = await runToEnd(s, s.flow());
      expect(outcome?.outcome).toBe('joined');
      expect(s.joinClient.calls).toHaveLength(2);
      expect(s.lock.calls).toHaveLength(1);
      expect([...s.files.written.keys()]).toEqual(cpFiles);
    },
  );

  it('on control plane: refuses a ticket with a control-plane file twice', async () => {
    const s = setup('ControlPlane');
    const f = { name: 'ca.key', data: bytes('k') };
    s.joinClient.ticketAnswers = [validTicket({ controlPlaneFiles: [f, f] })];
    await runToEnd(s, s.flow());
    expect(s.joinClient.calls).toHaveLength(2);
    expect(s.lock.calls).toHaveLength(1);
  });

  it.each([
    ['state disk key', { stateDiskKey: new Uint8Array() }],
    ['measurement secret', { measurementSecret: new Uint8Array() }],
    ['measurement salt', { measurementSalt: new Uint8Array() }],
    ['kubelet certificate', { kubeletCert: new Uint8Array() }],
    ['API server endpoint', { apiServerEndpoint: '' }],
    ['bootstrap token', { token: '' }],
    ['discovery token CA cert hash', { discoveryTokenCaCertHash: '' }],
  ])('refuses a ticket with an empty %s before the lock', async (field, override) => {
    const s = setup();
    s.joinClient.ticketAnswers = [validTicket(override)];
    await runToEnd(s, s.flow());
    expect(s.joinClient.calls).toHaveLength(2);
    expect(s.lock.calls).toHaveLength(1);
    expect(s.logger.text()).toContain(`${field} is empty`);
  });

  it('writes the join receipt to the state disk after the node state, and joins even when that write fails', async () => {
    const s = setup('Worker');
    s.joinClient.ticketValue = validTicket({ receipt: 'eyJhbGciOiJFUzI1NiJ9.e30.c2ln' });
    const { outcome } = await runToEnd(s, s.flow({ paths: { receiptPath: '/state/receipt.jwt' } }));
    expect(outcome?.outcome).toBe('joined');
    expect([...s.files.written.keys()]).toEqual([...workerFiles, '/state/receipt.jwt']);
    expect(Buffer.from(s.files.written.get('/state/receipt.jwt') ?? []).toString()).toBe(
      'eyJhbGciOiJFUzI1NiJ9.e30.c2ln\n',
    );

    const f = setup('Worker');
    f.joinClient.ticketValue = validTicket({ receipt: 'x.y.z' });
    f.files.errFor.set(DEFAULT_JOIN_PATHS.receiptPath, new Error('disk full'));
    const failed = await runToEnd(f, f.flow());
    expect(failed.outcome?.outcome).toBe('joined');
    expect(f.logger.text()).toContain('Failed to write the join receipt');
  });

  it('writes the node state with the role and the ticket’s measurement salt', async () => {
    const s = setup('ControlPlane');
    await runToEnd(s, s.flow());
    expect(s.nodeState.states).toEqual([
      { role: 'ControlPlane', measurementSalt: s.joinClient.ticketValue.measurementSalt },
    ]);
  });

  it('passes the ticket to kubeadm join', async () => {
    const s = setup('ControlPlane');
    await runToEnd(s, s.flow());
    const t = s.joinClient.ticketValue;
    expect(s.joiner.calls[0]?.args).toEqual({
      apiServerEndpoint: t.apiServerEndpoint,
      token: t.token,
      discoveryTokenCaCertHash: t.discoveryTokenCaCertHash,
      nodeName: 'node-1',
      nodeIp: '192.0.2.5',
      role: 'ControlPlane',
      kubernetesVersion: '',
      components: t.kubernetesComponents,
      kubeletCertPath: CERT_PATH,
      kubeletKeyPath: KEY_PATH,
    });
  });

  it('on control plane: joinCluster fails: the error says the attempts failed and keeps the cause', async () => {
    const s = setup('ControlPlane');
    s.joiner.joinClusterErr = someErr;
    const { err } = await runToEnd(s, s.flow());
    expect((err as Error).message).toContain('3 attempts failed');
    expect((err as Error).message).toContain('failed');
  });

  it('never logs the token or a key', async () => {
    const s = setup('ControlPlane');
    s.joiner.joinAnswers = [someErr];
    s.joinClient.ticketAnswers = [someErr];
    await runToEnd(s, s.flow());
    const t = s.joinClient.ticketValue;
    const text = s.logger.text();
    expect(text).not.toContain(t.token);
    for (const secret of [t.stateDiskKey, t.measurementSecret]) {
      expect(text).not.toContain(Buffer.from(secret).toString('hex'));
      expect(text).not.toContain(Buffer.from(secret).toString('base64'));
    }
    expect(text).not.toContain('key-');
  });

  it('rejects invalid backoff options', () => {
    const s = setup();
    expect(() => s.flow({ backoff: { initialMs: 5000, maxMs: 10 } })).toThrow('invalid backoff');
  });
});
