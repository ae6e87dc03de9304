/**
 * aws-nitro-tpm: AWS gives no EK/AK binding, so the attestation key is trusted as
 * carried; the CVM check asks EC2 whether the instance's AMI (from the IMDS instance identity document
 * in InstanceInfo) has `TpmSupport == "v2.0"`.
 */
import type { AmiTpmSupport } from '../../../ports/ami-tpm-support.js';
import { isConfbootError, messageOf } from '../../../ports/errors.js';
import type { VtpmVariantChecks } from '../vtpm/validator.js';

/** The fields of the IMDS instance identity document the check needs. */
export interface InstanceIdentity {
  region: string;
  imageId: string;
}

/** Parses Go JSON of the AWS IMDS `InstanceIdentityDocument` (json tags `region`, `imageId`). */
export function parseInstanceIdentity(raw: Uint8Array | undefined): InstanceIdentity | string {
  if (!raw) return 'InstanceInfo is missing (want the IMDS instance identity document)';
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(raw).toString('utf8'));
  } catch (err) {
    return `InstanceInfo is not JSON: ${messageOf(err)}`;
  }
  const o = doc as { region?: unknown; imageId?: unknown };
  if (typeof o?.region !== 'string' || !/^[a-z0-9-]{1,32}$/.test(o.region))
    return 'InstanceInfo has no valid region';
  if (typeof o.imageId !== 'string' || !/^ami-[0-9a-f]{8,17}$/.test(o.imageId))
    return 'InstanceInfo has no valid imageId';
  return { region: o.region, imageId: o.imageId };
}

/** Variant checks of aws-nitro-tpm, asking `ec2` about the AMI. */
export function awsNitroTpmChecks(ec2: AmiTpmSupport): VtpmVariantChecks {
  return {
    async checkAk(_doc, _ak, _extraData, rec) {
      rec.pass('ak-trust', 'aws-nitro-tpm trusts the attestation key as carried (AWS offers no AK binding)');
    },
    async validateCvm(doc, _state, rec, options) {
      const id = parseInstanceIdentity(doc.instanceInfo);
      if (typeof id === 'string') throw rec.fail('cvm', id);
      let support: string | undefined;
      try {
        support = await ec2.tpmSupport(id.region, id.imageId, options);
      } catch (err) {
        // The AMI does not exist: a verdict on the attester. Anything else (EC2 down) propagates.
        if (isConfbootError(err) && err.code === 'permission-denied')
          throw rec.fail('cvm', err.message, { cause: err });
        throw err;
      }
      if (support !== 'v2.0') {
        throw rec.fail(
          'cvm',
          `AMI ${id.imageId} in ${id.region} has TpmSupport ${JSON.stringify(support ?? null)}, want "v2.0"`,
        );
      }
      rec.pass('cvm', `AMI ${id.imageId} in ${id.region} has TpmSupport v2.0`);
    },
  };
}
