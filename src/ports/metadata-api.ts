import type { CallOptions, Endpoint, InstanceMetadata } from './types.js';

/** What the cloud (or the QEMU metadata server) says about this instance and its peers. */
export interface MetadataAPI {
  /** This instance. The name may be empty and the role `Unknown` while the cloud is still provisioning. */
  self(options?: CallOptions): Promise<InstanceMetadata>;
  /** All instances of this cluster (same UID). */
  list(options?: CallOptions): Promise<InstanceMetadata[]>;
  /** The Kubernetes API load balancer; rejects when there is none. */
  getLoadBalancerEndpoint(options?: CallOptions): Promise<Endpoint>;
  /** The bcrypt hash of the init secret, as bytes; empty when unset. */
  initSecretHash(options?: CallOptions): Promise<Uint8Array>;
  /** The cluster UID (tag/label `constellation-uid`); empty where the cloud has none (QEMU). */
  uid(options?: CallOptions): Promise<string>;
}

/** DI token for {@link MetadataAPI}. */
export const MetadataAPI = Symbol.for('confboot.MetadataAPI');
