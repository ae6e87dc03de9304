/**
 * FakeMetadataAPI: an in-memory MetadataAPI with real behaviour (the reference implementation of
 * the MetadataAPI contract, test/contract/metadata-api.ts). Tests for the join flow use it instead
 * of a cloud; `failNext` and `stallNext` script transient failures.
 */
import { ConfbootError } from '../../src/ports/errors.js';
import type { MetadataAPI } from '../../src/ports/metadata-api.js';
import type { CallOptions, Endpoint, InstanceMetadata } from '../../src/ports/types.js';
import type { MetadataWorld } from '../contract/metadata-api.js';

/** Default deadline when a caller passes no `timeoutInMs`. */
const DEFAULT_TIMEOUT_IN_MS = 10_000;

export class FakeMetadataAPI implements MetadataAPI {
  private world: MetadataWorld | undefined;
  private failures = 0;
  private stalls = 0;
  /** Every method called, in order (`self`, `list`, …). */
  readonly calls: string[] = [];

  constructor(world?: MetadataWorld) {
    this.world = world;
  }

  /** Replaces the world this fake describes. */
  setWorld(world: MetadataWorld): void {
    this.world = structuredClone(world);
  }

  /** The next call rejects `unavailable` (like a cloud answering 503). */
  failNext(): void {
    this.failures++;
  }

  /** The next call hangs until its deadline or the caller's signal. */
  stallNext(): void {
    this.stalls++;
  }

  private async call<T>(
    method: string,
    options: CallOptions | undefined,
    answer: (w: MetadataWorld) => T,
  ): Promise<T> {
    this.calls.push(method);
    const op = `fake metadata ${method}`;
    if (options?.signal?.aborted) throw new ConfbootError('unavailable', `${op}: aborted by caller`);
    if (this.failures > 0) {
      this.failures--;
      throw new ConfbootError('unavailable', `${op}: injected transient failure`);
    }
    if (this.stalls > 0) {
      this.stalls--;
      const ms = options?.timeoutInMs ?? DEFAULT_TIMEOUT_IN_MS;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, ms);
        options?.signal?.addEventListener(
          'abort',
          () => {
            clearTimeout(t);
            resolve();
          },
          { once: true },
        );
      });
      throw new ConfbootError('unavailable', `${op}: timed out after ${ms} ms`);
    }
    if (this.world === undefined) throw new ConfbootError('unavailable', `${op}: no instance metadata yet`);
    return answer(this.world);
  }

  private static toMetadata(i: {
    name: string;
    role: InstanceMetadata['role'];
    vpcIp: string;
    instanceId?: string;
  }): InstanceMetadata {
    return {
      name: i.name,
      role: i.role,
      vpcIp: i.vpcIp,
      providerId: `fake:///${i.name}`,
      ...(i.instanceId !== undefined ? { instanceId: i.instanceId } : {}),
    };
  }

  self(options?: CallOptions): Promise<InstanceMetadata> {
    return this.call('self', options, (w) => FakeMetadataAPI.toMetadata(w.self));
  }

  list(options?: CallOptions): Promise<InstanceMetadata[]> {
    return this.call('list', options, (w) => [w.self, ...w.peers].map(FakeMetadataAPI.toMetadata));
  }

  getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint> {
    return this.call('getLoadBalancerEndpoint', options, (w) => {
      if (w.loadBalancer === undefined)
        throw new ConfbootError(
          'failed-precondition',
          'fake metadata getLoadBalancerEndpoint: no load balancer',
        );
      return { ...w.loadBalancer };
    });
  }

  initSecretHash(options?: CallOptions): Promise<Uint8Array> {
    return this.call('initSecretHash', options, (w) => new TextEncoder().encode(w.initSecretHash ?? ''));
  }

  uid(options?: CallOptions): Promise<string> {
    return this.call('uid', options, (w) => w.uid);
  }
}
