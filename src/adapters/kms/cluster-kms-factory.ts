/**
 * Builds the KMS named by an init request's KMS and storage URIs (upstream `kmssetup.KMS`). confboot
 * supports upstream's cluster KMS only: `kms://cluster-kms?key=<base64url>&salt=<base64url>` with
 * storage `storage://no-store` (the URIs are parsed by grpc/kms-uri.ts). Cloud KMS backends are
 * not supported and are refused clearly.
 */
import { ConfbootError } from '../../ports/errors.js';
import type { KMS } from '../../ports/kms.js';
import type { KmsFactory } from '../../ports/kms-factory.js';
import { NO_STORE_URI, parseClusterKmsUri } from '../grpc/kms-uri.js';
import { HkdfKms } from './hkdf-kms.js';

/** {@link KmsFactory} for the cluster KMS; see the module comment. */
export class ClusterKmsFactory implements KmsFactory {
  /** Returns an {@link HkdfKms} over the URI's key and salt. */
  async fromUri(kmsUri: string, storageUri: string): Promise<KMS> {
    if (storageUri !== NO_STORE_URI)
      throw new ConfbootError(
        'invalid-argument',
        `unsupported storage URI: only "${NO_STORE_URI}" is supported with the cluster KMS`,
      );
    const { masterSecret, salt } = parseClusterKmsUri(kmsUri);
    return new HkdfKms(masterSecret, salt);
  }
}
