/**
 * Contract suite for the ClusterJoiner port (`kubeadm join`): a valid join succeeds for workers and
 * control planes and is seen by the cluster; a configuration kubeadm would refuse (bad token or CA
 * hash format) is rejected with the tool's message and without leaking the token; a transient
 * failure rejects recoverably and a later attempt succeeds; an aborted call does not join.
 *
 * Seeding: `seed.failTransiently(n)` makes the next n otherwise valid joins fail the way an
 * unreachable API server does (only asked for when `supports.transientFailures`);
 * `seed.joined()` lists the joins the world behind the subject has seen.
 */
import { describe, expect, it } from 'vitest';
import type { ClusterJoiner, JoinClusterArgs } from '../../src/ports/cluster-joiner.js';
import { isConfbootError } from '../../src/ports/errors.js';
import { type ContractFactory, freshSubjects } from './harness.js';

/** One join as the cluster saw it. */
export interface ObservedJoin {
  nodeName: string;
  controlPlane: boolean;
  apiServerEndpoint: string;
}

/** How the suite controls and observes the world behind a ClusterJoiner. */
export interface ClusterJoinerSeed {
  /** The next `times` valid joins fail transiently. */
  failTransiently(times: number): Promise<void>;
  /** Successful joins, in order. */
  joined(): Promise<ObservedJoin[]>;
}

/** Optional behaviour of a ClusterJoiner. */
export interface ClusterJoinerSupports {
  /** `seed.failTransiently` works. */
  transientFailures: boolean;
}

/** A valid worker join (token and hash in kubeadm's formats). */
export function validJoinArgs(overrides: Partial<JoinClusterArgs> = {}): JoinClusterArgs {
  return {
    apiServerEndpoint: '10.9.0.1:6443',
    token: 'abcdef.0123456789abcdef',
    discoveryTokenCaCertHash: `sha256:${'ab'.repeat(32)}`,
    nodeName: 'worker-0',
    nodeIp: '10.9.0.7',
    role: 'Worker',
    kubernetesVersion: 'v1.31.1',
    components: [],
    kubeletCertPath: '/run/state/kubelet/pki/kubelet-client-crt.pem',
    kubeletKeyPath: '/run/state/kubelet/pki/kubelet-client-key.pem',
    ...overrides,
  };
}

async function rejectionOf(p: Promise<unknown>): Promise<Error> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof Error)) throw new Error(`expected a rejection with an Error, got ${String(err)}`);
  return err;
}

/** Registers the ClusterJoiner contract tests for one implementation. */
export function describeClusterJoinerContract(
  name: string,
  factory: ContractFactory<ClusterJoiner, ClusterJoinerSeed, ClusterJoinerSupports>,
): void {
  describe(`ClusterJoiner contract: ${name}`, () => {
    const fresh = freshSubjects(factory);

    it('joins a worker with valid arguments', async () => {
      const { subject, seed } = await fresh();
      await subject.joinCluster(validJoinArgs());
      expect(await seed.joined()).toEqual([
        { nodeName: 'worker-0', controlPlane: false, apiServerEndpoint: '10.9.0.1:6443' },
      ]);
    });

    it('joins a control plane with valid arguments', async () => {
      const { subject, seed } = await fresh();
      await subject.joinCluster(
        validJoinArgs({ role: 'ControlPlane', nodeName: 'control-plane-1.internal', nodeIp: '10.9.0.2' }),
      );
      expect(await seed.joined()).toEqual([
        { nodeName: 'control-plane-1.internal', controlPlane: true, apiServerEndpoint: '10.9.0.1:6443' },
      ]);
    });

    it('rejects a token not in kubeadm’s format with the tool’s message, without leaking the token', async () => {
      const { subject, seed } = await fresh();
      const token = 'ABCDEF.0123456789ABCDEF';
      const err = await rejectionOf(subject.joinCluster(validJoinArgs({ token })));
      expect(err.message).toMatch(/bootstrap token .*was not of the form/);
      expect(err.message).not.toContain(token);
      expect(err.message).not.toContain('0123456789ABCDEF');
      expect(await seed.joined()).toEqual([]);
    });

    it('rejects a CA hash not in "sha256:<64 hex>" form with the tool’s message', async () => {
      const { subject, seed } = await fresh();
      const err = await rejectionOf(
        subject.joinCluster(validJoinArgs({ discoveryTokenCaCertHash: 'sha256:1234' })),
      );
      expect(err.message).toMatch(/caCertHashes/);
      expect(await seed.joined()).toEqual([]);
    });

    it('rejects a role that cannot join', async () => {
      const { subject, seed } = await fresh();
      await rejectionOf(subject.joinCluster(validJoinArgs({ role: 'Unknown' })));
      expect(await seed.joined()).toEqual([]);
    });

    it('does not join when the signal is already aborted', async () => {
      const { subject, seed } = await fresh();
      const ac = new AbortController();
      ac.abort(new Error('shutting down'));
      const err = await rejectionOf(subject.joinCluster(validJoinArgs(), { signal: ac.signal }));
      expect(err.message).toBe('shutting down');
      expect(await seed.joined()).toEqual([]);
    });

    it('fails transiently (recoverable) and joins on a later attempt', async (ctx) => {
      const { subject, seed, supports } = await fresh();
      if (!supports.transientFailures) ctx.skip();
      await seed.failTransiently(2);
      for (let attempt = 1; attempt <= 2; attempt++) {
        const err = await rejectionOf(subject.joinCluster(validJoinArgs()));
        expect(isConfbootError(err) && err.recoverable, `attempt ${attempt}: ${err.message}`).toBe(true);
        expect(err.message).not.toContain('0123456789abcdef');
        expect(await seed.joined()).toEqual([]);
      }
      await subject.joinCluster(validJoinArgs());
      expect(await seed.joined()).toHaveLength(1);
    });
  });
}
