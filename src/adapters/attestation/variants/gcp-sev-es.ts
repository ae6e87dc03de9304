/**
 * gcp-sev-es: the attestation key must equal the instance's shielded-identity
 * signing key, looked up through the GCE API with the zone, project and instance name from
 * InstanceInfo, only after the quote verified with the document's AK (the lookup itself is cached
 * and budgeted by BoundedShieldedIdentity); the CVM check reads the GCE platform state from the replay-verified event log:
 * firmware version ≥ 1 and confidential technology AMD_SEV.
 */
import { createPublicKey } from 'node:crypto';
import { isConfbootError, messageOf } from '../../../ports/errors.js';
import type { GceShieldedIdentity } from '../../../ports/gce-shielded-identity.js';
import { TpmAlg } from '../../tpm/tpm2-wire.js';
import { platformState } from '../eventlog/tcg-log.js';
import type { VtpmVariantChecks } from '../vtpm/validator.js';
import { sameKey } from '../vtpm/verify-attestation.js';

/** Minimum GCE virtual firmware version (upstream `minimumGceVersion`). */
export const MINIMUM_GCE_VERSION = 1;

/** go-tpm-tools `GCEInstanceInfo` as Go JSON (snake_case tags). */
export interface GceInstanceInfo {
  zone: string;
  project_id: string;
  instance_name: string;
  project_number?: number;
  instance_id?: number | string;
}

/** Parses the GCE instance info; returns an error message when unusable. */
export function parseGceInstanceInfo(raw: Uint8Array | undefined): GceInstanceInfo | string {
  if (!raw) return 'InstanceInfo is missing (want GCE instance info)';
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(raw).toString('utf8'));
  } catch (err) {
    return `InstanceInfo is not JSON: ${messageOf(err)}`;
  }
  const o = v as Partial<GceInstanceInfo>;
  for (const k of ['zone', 'project_id', 'instance_name'] as const) {
    if (typeof o?.[k] !== 'string' || o[k] === '' || !/^[A-Za-z0-9.:_-]{1,100}$/.test(o[k] as string))
      return `InstanceInfo has no valid ${k}`;
  }
  return o as GceInstanceInfo;
}

/**
 * The gcp-sev-es CVM check alone (upstream validateCVM): GCE firmware version ≥ 1 and AMD_SEV, read
 * from the replay-verified event log. Exported for callers that trust the AK another way.
 */
export const gceSevCvmCheck: VtpmVariantChecks['validateCvm'] = async (_doc, state, rec) => {
  if (!state.eventLog) throw rec.fail('cvm', 'no event log: cannot tell the GCE platform state');
  const log = state.eventLog;
  const platform = rec.run(() => platformState(log, TpmAlg.SHA256));
  const version = platform.gceVersion ?? 0;
  if (version < MINIMUM_GCE_VERSION)
    throw rec.fail('cvm', `outdated GCE version: ${version} (require >= ${MINIMUM_GCE_VERSION})`);
  if (platform.technology !== 'AMD_SEV')
    throw rec.fail('cvm', `unexpected confidential technology: ${platform.technology} (expected: AMD_SEV)`);
  rec.pass('cvm', `GCE firmware v${version}, AMD_SEV`);
};

/** Variant checks of gcp-sev-es, trusting the AK the GCE API names. */
export function gcpSevEsChecks(gce: GceShieldedIdentity): VtpmVariantChecks {
  return {
    // The Compute API lookup is for an instance the document names: only a document whose quote
    // verifies with its own AK for this session's nonce gets that far.
    verifyQuoteFirst: true,
    async checkAk(doc, ak, _extraData, rec, options) {
      const info = parseGceInstanceInfo(doc.instanceInfo);
      if (typeof info === 'string') throw rec.fail('ak-trust', info);
      const where = `${info.project_id}/${info.zone}/${info.instance_name}`;
      let pem: string;
      try {
        pem = await gce.signingKeyPem(info.project_id, info.zone, info.instance_name, options);
      } catch (err) {
        // No such instance or no signing key: a verdict on the attester. An outage propagates.
        if (isConfbootError(err) && err.code === 'permission-denied')
          throw rec.fail('ak-trust', err.message, { cause: err });
        throw err;
      }
      let trusted: ReturnType<typeof createPublicKey>;
      try {
        trusted = createPublicKey(pem);
      } catch (err) {
        throw rec.fail('ak-trust', `shielded identity of ${where} has an unparsable signing key`, {
          cause: err,
        });
      }
      if (!sameKey(ak, trusted)) {
        throw rec.fail(
          'ak-trust',
          `untrusted attestation public key: it is not the shielded-identity signing key of ${where}`,
        );
      }
      rec.pass('ak-trust', `attestation key is the shielded-identity signing key of ${where}`);
    },
    validateCvm: gceSevCvmCheck,
  };
}
