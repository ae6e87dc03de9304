/**
 * Applying a join ticket past the node lock, on its own (stubs for every port, fake time): the
 * order of its steps, which failures are final, and the receipt that is only logged when it cannot
 * be kept. The whole join flow around it is tested in join-flow.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  type ApplyJoinTicketOptions,
  applyJoinTicket,
  DEFAULT_JOIN_PATHS,
  JOIN_CLUSTER_ATTEMPTS,
} from '../../src/domain/join-ticket-apply.js';
import { NO_HOST_KEY } from '../../src/domain/ssh-node.js';
import { isConfbootError } from '../../src/ports/errors.js';
import type { InstanceMetadata, JoinTicket, Role } from '../../src/ports/types.js';
import { bytes, joinFlowStubs, someErr, validTicket } from './stubs.js';

function self(role: Role): InstanceMetadata {
  return { name: 'node-1', providerId: 'p', role, vpcIp: '10.0.0.7' };
}

function setup(ticket: JoinTicket = validTicket(), options: Partial<ApplyJoinTicketOptions> = {}) {
  const s = joinFlowStubs();
  const apply = (role: Role) =>
    applyJoinTicket(
      s,
      self(role),
      { ticket, keyPem: bytes('kubelet key'), endpoint: '10.0.0.1:30090', hostKey: NO_HOST_KEY },
      {
        paths: DEFAULT_JOIN_PATHS,
        joinClusterMs: 60_000,
        backoff: { initialMs: 1_000, maxMs: 30_000 },
        ...options,
      },
    );
  return { ...s, apply };
}

describe('applyJoinTicket', () => {
  it('on control plane: runs the callback, sets the disk key, writes every file, then joins', async () => {
    const order: string[] = [];
    const s = setup(validTicket({ receipt: 'a.b.c' }), {
      onPointOfNoReturn: () => void order.push('callback'),
    });
    await s.apply('ControlPlane');
    expect(order).toEqual(['callback']);
    expect(s.disk.calls).toEqual(['open', 'updatePassphrase', 'release']);
    expect([...s.files.written.keys()]).toEqual([
      '/etc/kubernetes/pki/ca.key',
      '/etc/kubernetes/pki/etcd/ca.crt',
      DEFAULT_JOIN_PATHS.kubeletCertPath,
      DEFAULT_JOIN_PATHS.kubeletKeyPath,
      DEFAULT_JOIN_PATHS.receiptPath,
    ]);
    expect(s.nodeState.states).toEqual([
      { role: 'ControlPlane', measurementSalt: validTicket().measurementSalt },
    ]);
    expect(s.joiner.calls.map((c) => c.args.nodeName)).toEqual(['node-1']);
  });

  it('on worker: writes no control-plane file', async () => {
    const s = setup();
    await s.apply('Worker');
    expect([...s.files.written.keys()]).toEqual([
      DEFAULT_JOIN_PATHS.kubeletCertPath,
      DEFAULT_JOIN_PATHS.kubeletKeyPath,
    ]);
  });

  it('refuses a control-plane file name that is not one of the known files, as final', async () => {
    const s = setup(validTicket({ controlPlaneFiles: [{ name: '../x', data: bytes('x') }] }));
    const err = await s.apply('ControlPlane').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isConfbootError(err) && err.recoverable).toBe(false);
    expect((err as Error).message).toMatch(
      /writing control-plane file \.\.\/x.*unexpected control-plane file name/,
    );
    expect(s.files.written.size).toBe(0);
  });

  it('a failing step is final and names the step; nothing after it runs', async () => {
    const s = setup();
    s.disk.updatePassphraseErr = someErr;
    const err = await s.apply('Worker').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isConfbootError(err) && err.recoverable).toBe(false);
    expect((err as Error).message).toContain('join after node lock: updating state disk passphrase');
    expect(s.files.written.size).toBe(0);
    expect(s.joiner.calls).toEqual([]);
  });

  it('logs a receipt it cannot keep and joins anyway', async () => {
    const s = setup(validTicket({ receipt: 'a.b.c' }));
    s.files.errFor.set(DEFAULT_JOIN_PATHS.receiptPath, new Error('disk full'));
    await s.apply('Worker');
    expect(s.joiner.calls).toHaveLength(1);
    expect(s.logger.events).toContainEqual(
      expect.objectContaining({ level: 'warn', msg: 'Failed to write the join receipt' }),
    );
  });

  it(`tries kubeadm join ${JOIN_CLUSTER_ATTEMPTS} times with a jittered pause between, then fails for good`, async () => {
    const s = setup();
    s.joiner.joinClusterErr = someErr;
    const done = s.apply('Worker').then(
      () => undefined,
      (e: unknown) => e,
    );
    const err = await s.clock.runUntil(done);
    expect(s.joiner.calls).toHaveLength(JOIN_CLUSTER_ATTEMPTS);
    // Each attempt also sleeps its 60 s deadline on the clock; the pauses are the other sleeps.
    expect(s.clock.sleeps.filter((ms) => ms !== 60_000)).toHaveLength(JOIN_CLUSTER_ATTEMPTS - 1);
    expect((err as Error).message).toContain(`${JOIN_CLUSTER_ATTEMPTS} attempts failed`);
  });

  it('joins after a transient kubeadm failure', async () => {
    const s = setup();
    s.joiner.joinAnswers = [someErr, undefined];
    await s.clock.runUntil(s.apply('Worker'));
    expect(s.joiner.calls).toHaveLength(2);
  });
});
