/**
 * GceShieldedIdentity through @google-cloud/compute (REST fallback transport):
 * `instances.getShieldedInstanceIdentity(project, zone, instance)` → `signingKey.ekPub`, the PEM
 * public key the gcp-sev-es validator trusts as the instance's AK. The SDK is
 * loaded on first use.
 */
import type * as Compute from '@google-cloud/compute';
import type { Clock } from '../../../ports/clock.js';
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { GceShieldedIdentity } from '../../../ports/gce-shielded-identity.js';
import type { CallOptions } from '../../../ports/types.js';
import { BoundedLookups } from '../../http/bounded-lookups.js';
import { importOptionalPeer } from '../../system/optional-peer.js';
import { fetchCapableAuthClient, type GcpAuthClient } from './metadata-api.js';

/** Options of {@link ComputeShieldedIdentity}. */
export interface ComputeShieldedIdentityOptions {
  /** Compute API host; default the SDK's (`compute.googleapis.com`). */
  apiEndpoint?: string;
  /** Compute API port; default the SDK's. */
  port?: number;
  /** `https` (default) or `http` (local fakes only). */
  protocol?: 'http' | 'https';
  /** Credentials; default the SDK's application default credentials. */
  authClient?: GcpAuthClient;
  /** Per-call deadline, default 10 s. */
  timeoutInMs?: number;
}

/** Reads shielded instance identities with the Compute API. */
export class ComputeShieldedIdentity implements GceShieldedIdentity {
  private client: Promise<Compute.InstancesClient> | undefined;

  constructor(private readonly options: ComputeShieldedIdentityOptions = {}) {}

  private instances(): Promise<Compute.InstancesClient> {
    this.client ??= importOptionalPeer(() => import('@google-cloud/compute')).then((sdk) => {
      const o = this.options;
      return new sdk.InstancesClient({
        fallback: true,
        ...(o.apiEndpoint !== undefined ? { apiEndpoint: o.apiEndpoint } : {}),
        ...(o.port !== undefined ? { port: o.port } : {}),
        ...(o.protocol !== undefined ? { protocol: o.protocol } : {}),
        ...(o.authClient !== undefined ? { authClient: fetchCapableAuthClient(o.authClient) } : {}),
      } as ConstructorParameters<typeof sdk.InstancesClient>[0]);
    });
    return this.client;
  }

  /** {@inheritDoc GceShieldedIdentity.signingKeyPem} */
  async signingKeyPem(
    project: string,
    zone: string,
    instance: string,
    options?: CallOptions,
  ): Promise<string> {
    const op = `getting shielded instance identity of ${project}/${zone}/${instance}`;
    options?.signal?.throwIfAborted();
    let ekPub: string | null | undefined;
    try {
      const client = await this.instances();
      const [identity] = await client.getShieldedInstanceIdentity(
        { project, zone, instance },
        { timeout: options?.timeoutInMs ?? this.options.timeoutInMs ?? 10_000, maxRetries: 1 },
      );
      ekPub = identity.signingKey?.ekPub;
    } catch (err) {
      const code = (err as { code?: number }).code;
      // 404: the instance named in the attester's instance info does not exist.
      throw wrapError(op, err, code === 404 || code === 5 ? 'permission-denied' : 'unavailable');
    }
    if (!ekPub) throw new ConfbootError('permission-denied', `${op}: the instance has no signing key`);
    return ekPub;
  }

  /** Closes the SDK client. */
  async close(): Promise<void> {
    if (this.client) await (await this.client).close();
  }
}

/** Options of {@link BoundedShieldedIdentity}. */
export interface BoundedShieldedIdentityOptions {
  clock: Clock;
  /** Lookups that may start back to back (and run at once). Default 8. */
  burst?: number;
  /** One more lookup may start every this many ms. Default 200 (5 a second). */
  refillEveryInMs?: number;
  /** How long an instance's signing key is served from the cache. Default 5 min. */
  ttlInMs?: number;
  /** How long an instance whose lookup failed is refused without a request. Default 60 s. */
  negativeTtlInMs?: number;
  /** Instances kept. Default 4096. */
  maxEntries?: number;
}

/**
 * The Compute API lookup for gcp-sev-es inside a small budget: the instance is named by the
 * document, whose AK is not trusted yet, so answers and failures are cached per instance, lookups
 * for one instance are shared (a caller's signal stops only its own wait), and a miss beyond the
 * budget is refused at once with a recoverable `resource-exhausted` error (BoundedLookups).
 */
export class BoundedShieldedIdentity implements GceShieldedIdentity {
  private readonly lookups: BoundedLookups<string>;

  constructor(
    private readonly inner: GceShieldedIdentity,
    options: BoundedShieldedIdentityOptions,
  ) {
    this.lookups = new BoundedLookups({
      clock: options.clock,
      what: 'Compute API lookups of shielded instance identities',
      burst: options.burst ?? 8,
      refillEveryInMs: options.refillEveryInMs ?? 200,
      ttlInMs: options.ttlInMs ?? 5 * 60_000,
      negativeTtlInMs: options.negativeTtlInMs ?? 60_000,
      maxEntries: options.maxEntries ?? 4096,
    });
  }

  /** Lookups started (cache misses within the budget). */
  get started(): number {
    return this.lookups.started;
  }

  /** {@inheritDoc GceShieldedIdentity.signingKeyPem} */
  signingKeyPem(project: string, zone: string, instance: string, options?: CallOptions): Promise<string> {
    const where = `${project}/${zone}/${instance}`;
    const { signal: _caller, ...rest } = options ?? {};
    return this.lookups.get(
      where,
      `getting shielded instance identity of ${where}`,
      () => this.inner.signingKeyPem(project, zone, instance, rest),
      options?.signal,
    );
  }
}
