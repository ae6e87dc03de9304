import type { CallOptions } from './types.js';

/**
 * Asks EC2 whether an AMI boots with NitroTPM (upstream: `DescribeImages(imageId)` in the instance's
 * region, attribute `TpmSupport`). Used by the aws-nitro-tpm validator, which wants "v2.0".
 */
export interface AmiTpmSupport {
  /**
   * Returns the AMI's `TpmSupport` value (`v2.0` when NitroTPM is enabled) or undefined when the
   * image has none. Rejects when the image does not exist or EC2 cannot be reached.
   */
  tpmSupport(region: string, imageId: string, options?: CallOptions): Promise<string | undefined>;
}

/** DI token for {@link AmiTpmSupport}. */
export const AmiTpmSupport = Symbol.for('confboot.AmiTpmSupport');
