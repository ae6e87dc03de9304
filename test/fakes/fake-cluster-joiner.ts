/**
 * FakeClusterJoiner: an in-memory ClusterJoiner for join-flow tests. It checks the arguments the way
 * kubeadm checks its configuration (token and CA-hash formats, node name), records every call and
 * every successful join, and fails on demand (scripted transient failures or explicit errors).
 */
import type { ClusterJoiner, JoinClusterArgs } from '../../src/ports/cluster-joiner.js';
import { ConfbootError } from '../../src/ports/errors.js';
import type { CallOptions } from '../../src/ports/types.js';

const TOKEN_RE = /^([a-z0-9]{6})\.([a-z0-9]{16})$/;
const HASH_RE = /^sha256:[0-9a-f]{64}$/;
const NAME_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** In-memory {@link ClusterJoiner}. */
export class FakeClusterJoiner implements ClusterJoiner {
  /** Every call, in order, including failed ones. */
  readonly calls: JoinClusterArgs[] = [];
  /** Calls that joined the cluster. */
  readonly joined: JoinClusterArgs[] = [];
  private transientFailures = 0;
  private readonly scripted: Error[] = [];

  /** The next `times` valid joins fail like a transient kubeadm failure (API server not reachable). */
  failTransiently(times: number): void {
    this.transientFailures += times;
  }

  /** The next calls reject with these errors, in order, before any check. */
  failNext(...errors: Error[]): void {
    this.scripted.push(...errors);
  }

  async joinCluster(args: JoinClusterArgs, options?: CallOptions): Promise<void> {
    options?.signal?.throwIfAborted();
    this.calls.push(structuredClone(args));
    const scripted = this.scripted.shift();
    if (scripted) throw scripted;
    const problems: string[] = [];
    if (!TOKEN_RE.test(args.token))
      problems.push(
        `discovery.bootstrapToken.token: Invalid value: "<redacted>": the bootstrap token "<redacted>" was not of the form "${TOKEN_RE.source}"`,
      );
    if (!HASH_RE.test(args.discoveryTokenCaCertHash))
      problems.push(
        `discovery.bootstrapToken.caCertHashes[0]: Invalid value: "${args.discoveryTokenCaCertHash}": must be "sha256:" followed by 64 lowercase hex digits`,
      );
    if (!NAME_RE.test(args.nodeName))
      problems.push(`nodeRegistration.name: Invalid value: "${args.nodeName}"`);
    if (args.role !== 'ControlPlane' && args.role !== 'Worker')
      problems.push(`role "${args.role}" cannot join`);
    if (args.role === 'ControlPlane' && args.nodeIp === '')
      problems.push('controlPlane.localAPIEndpoint.advertiseAddress: Required value');
    if (problems.length > 0)
      throw new ConfbootError(
        'internal',
        `joining cluster (fake kubeadm): invalid configuration: [${problems.join(', ')}]`,
        {
          recoverable: true,
        },
      );
    if (this.transientFailures > 0) {
      this.transientFailures--;
      throw new ConfbootError(
        'internal',
        `joining cluster (fake kubeadm): couldn't validate the identity of the API Server at ${args.apiServerEndpoint}: connection refused`,
        { recoverable: true },
      );
    }
    this.joined.push(structuredClone(args));
  }
}
