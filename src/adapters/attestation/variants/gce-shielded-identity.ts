/**
 * GceShieldedIdentity through @google-cloud/compute (REST fallback transport):
 * `instances.getShieldedInstanceIdentity(project, zone, instance)` → `signingKey.ekPub`, the PEM
 * public key the gcp-sev-es validator trusts as the instance's AK. The SDK is
 * loaded on first use.
 */
import type * as Compute from '@google-cloud/compute';
import { ConfbootError, wrapError } from '../../../ports/errors.js';
import type { GceShieldedIdentity } from '../../../ports/gce-shielded-identity.js';
import type { CallOptions } from '../../../ports/types.js';
import { fetchCapableAuthClient, type GcpAuthClient } from '../../cloud/gcp/metadata-api.js';

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
    this.client ??= import('@google-cloud/compute').then((sdk) => {
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
