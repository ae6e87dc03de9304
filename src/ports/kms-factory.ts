import type { KMS } from './kms.js';

/** Builds a KMS from the init request's URIs (e.g. `kms://cluster-kms?key=…&salt=…`, `storage://no-store`). */
export interface KmsFactory {
  /** Rejects with `invalid-argument` on an unsupported or malformed URI. */
  fromUri(kmsUri: string, storageUri: string): Promise<KMS>;
}

/** DI token for {@link KmsFactory}. */
export const KmsFactory = Symbol.for('confboot.KmsFactory');
