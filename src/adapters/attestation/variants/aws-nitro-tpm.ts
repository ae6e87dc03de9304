/**
 * aws-nitro-tpm: an EC2 instance's NitroTPM. Its attestation key is trusted because AWS signed it:
 * the instance info carries, next to the IMDS instance identity document, AWS's NitroTPM
 * attestation document (shared/nitrotpm-document.ts), requested with nonce = extraData (so it is
 * bound to this attested-TLS session) and `public_key` = the AK's SubjectPublicKeyInfo. The
 * validator checks that document (signature, chain to the pinned AWS Nitro root at the Clock's
 * time, nonce), that its `public_key` is the quote's AK, and that a SHA-384 quote by that AK shows
 * exactly the PCR values AWS signed. The CVM check then asks EC2 whether the instance's AMI has
 * `TpmSupport == "v2.0"`.
 *
 * Upstream trusted the AK "as carried" (AWS then offered no binding); that stays available only as
 * the explicit opt-in {@link AwsNitroTpmOptions.trustCarriedAk}, for documents without the NitroTPM
 * document.
 *
 * Instance info (JSON): the IMDS document's fields, plus `nitroTpmDocument` (standard base64). Go's
 * encoding/json ignores the extra field, so upstream's parser still reads the identity.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import type { AmiTpmSupport } from '../../../ports/ami-tpm-support.js';
import type { Clock } from '../../../ports/clock.js';
import { ConfbootError, isConfbootError, messageOf } from '../../../ports/errors.js';
import type { NitroTpmAttestor } from '../../../ports/nitrotpm-attestor.js';
import type { Tpm } from '../../../ports/tpm.js';
import type { CallOptions } from '../../../ports/types.js';
import { parseTpmtPublic, type TpmtPublic } from '../../tpm/tpm2-public.js';
import { TpmAlg } from '../../tpm/tpm2-wire.js';
import type { CheckRecorder } from '../shared/checks.js';
import { type NitroTpmDocument, verifyNitroTpmDocument } from '../shared/nitrotpm-document.js';
import type { VtpmDocument } from '../shared/vtpm-document.js';
import { type BankQuoter, VtpmIssuer, type VtpmIssuerBaseOptions } from '../vtpm/issuer.js';
import { verifyQuote } from '../vtpm/quote.js';
import type { VtpmVariantChecks } from '../vtpm/validator.js';
import { sameKey } from '../vtpm/verify-attestation.js';

/** The instance-info field holding AWS's NitroTPM attestation document (base64). */
export const NITROTPM_DOCUMENT_FIELD = 'nitroTpmDocument';

/** The fields of the instance info the checks need. */
export interface InstanceIdentity {
  region: string;
  imageId: string;
  /** AWS's NitroTPM attestation document, when the instance info carries one. */
  nitroTpmDocument?: Uint8Array;
}

/**
 * Parses the instance info: Go JSON of the AWS IMDS `InstanceIdentityDocument` (json tags `region`,
 * `imageId`) and, when present, the NitroTPM document.
 */
export function parseInstanceIdentity(raw: Uint8Array | undefined): InstanceIdentity | string {
  if (!raw) return 'InstanceInfo is missing (want the IMDS instance identity document)';
  let doc: unknown;
  try {
    doc = JSON.parse(Buffer.from(raw).toString('utf8'));
  } catch (err) {
    return `InstanceInfo is not JSON: ${messageOf(err)}`;
  }
  const o = doc as { region?: unknown; imageId?: unknown; [NITROTPM_DOCUMENT_FIELD]?: unknown };
  if (typeof o?.region !== 'string' || !/^[a-z0-9-]{1,32}$/.test(o.region))
    return 'InstanceInfo has no valid region';
  if (typeof o.imageId !== 'string' || !/^ami-[0-9a-f]{8,17}$/.test(o.imageId))
    return 'InstanceInfo has no valid imageId';
  const nitro = o[NITROTPM_DOCUMENT_FIELD];
  if (nitro === undefined || nitro === null) return { region: o.region, imageId: o.imageId };
  if (typeof nitro !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(nitro))
    return `InstanceInfo field ${NITROTPM_DOCUMENT_FIELD} is not standard base64`;
  return { region: o.region, imageId: o.imageId, nitroTpmDocument: Buffer.from(nitro, 'base64') };
}

/** Options of {@link awsNitroTpmChecks}. */
export interface AwsNitroTpmOptions {
  /** The time at which the NitroTPM document's certificates must be valid. */
  clock: Pick<Clock, 'now'>;
  /** Accepted Nitro roots by SHA-256 of their DER; default AWS's published root. */
  rootSha256?: readonly string[];
  /**
   * Upstream's behaviour, off by default: a document WITHOUT a NitroTPM attestation document passes
   * `ak-trust` with the AK as carried, so any TPM (a software one too) whose quote matches the
   * measurements passes. A document that carries one is always verified.
   */
  trustCarriedAk?: boolean;
}

const CURVES: Record<string, string> = { prime256v1: 'P-256', secp384r1: 'P-384', secp521r1: 'P-521' };

/**
 * Whether `publicKey` (the document's `public_key`: SubjectPublicKeyInfo DER, or an uncompressed
 * SEC1 point on the AK's curve) is the key of `ak`.
 */
export function publicKeyIsAk(publicKey: Uint8Array, ak: TpmtPublic): boolean {
  let key: KeyObject;
  try {
    if (publicKey[0] === 0x04 && ak.type === TpmAlg.ECC) {
      const crv = CURVES[ak.publicKey.asymmetricKeyDetails?.namedCurve ?? ''];
      const size = (publicKey.length - 1) / 2;
      if (crv === undefined || !Number.isInteger(size)) return false;
      const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64url');
      key = createPublicKey({
        key: {
          kty: 'EC',
          crv,
          x: b64(publicKey.subarray(1, 1 + size)),
          y: b64(publicKey.subarray(1 + size)),
        },
        format: 'jwk',
      });
    } else key = createPublicKey({ key: Buffer.from(publicKey), format: 'der', type: 'spki' });
  } catch {
    return false;
  }
  return sameKey(ak, key);
}

/**
 * Checks that a SHA-384 quote by the (verified) AK, over the same TPM nonce as the verified SHA-256
 * quote, shows the PCR values AWS signed — every PCR the SHA-256 quote covers.
 */
function checkNitroPcrs(
  doc: VtpmDocument,
  ak: TpmtPublic,
  tpmNonce: Uint8Array,
  quoted256: ReadonlyMap<number, Uint8Array>,
  nitro: NitroTpmDocument,
  rec: CheckRecorder,
): void {
  const sha384 = doc.attestation.quotes.filter((q) => q.pcrHashAlg === TpmAlg.SHA384);
  if (sha384.length !== 1)
    throw rec.fail(
      'nitrotpm-pcrs',
      `${sha384.length} SHA-384 quotes; want exactly one to compare with AWS's`,
    );
  const quote = verifyQuote(ak, sha384[0] as (typeof sha384)[0], tpmNonce, rec);
  for (const index of quoted256.keys())
    if (!quote.pcrs.has(index))
      throw rec.fail('nitrotpm-pcrs', `the SHA-384 quote does not cover PCR ${index}`);
  for (const [index, value] of quote.pcrs) {
    const signed = nitro.pcrs.get(index);
    if (signed === undefined || !Buffer.from(signed).equals(Buffer.from(value)))
      throw rec.fail('nitrotpm-pcrs', `quoted SHA-384 PCR ${index} differs from the value AWS signed`);
  }
  rec.pass('nitrotpm-pcrs', `${quote.pcrs.size} quoted SHA-384 PCRs equal the values AWS signed`);
}

/** Variant checks of aws-nitro-tpm, asking `ec2` about the AMI. */
export function awsNitroTpmChecks(ec2: AmiTpmSupport, options: AwsNitroTpmOptions): VtpmVariantChecks {
  // The NitroTPM document each validation verified in checkAk, for its validateCvm step.
  const verified = new WeakMap<VtpmDocument, NitroTpmDocument>();
  return {
    async checkAk(doc, ak, extraData, rec) {
      const id = parseInstanceIdentity(doc.instanceInfo);
      if (typeof id === 'string') throw rec.fail('ak-trust', id);
      if (id.nitroTpmDocument === undefined) {
        if (options.trustCarriedAk) {
          rec.pass(
            'ak-trust',
            'no NitroTPM document: the attestation key is trusted as carried (trustCarriedAk opt-in)',
          );
          return;
        }
        throw rec.fail(
          'ak-trust',
          `InstanceInfo carries no NitroTPM attestation document (${NITROTPM_DOCUMENT_FIELD}), so nothing vouches for the attestation key`,
        );
      }
      const nitro = verifyNitroTpmDocument(
        id.nitroTpmDocument,
        {
          at: options.clock.now(),
          nonce: extraData,
          ...(options.rootSha256 ? { rootSha256: options.rootSha256 } : {}),
        },
        rec,
      );
      if (nitro.publicKey === undefined || !publicKeyIsAk(nitro.publicKey, ak))
        throw rec.fail(
          'ak-trust',
          `the NitroTPM document's public_key is ${nitro.publicKey ? 'not the attestation key' : 'missing'}`,
        );
      verified.set(doc, nitro);
      rec.pass('ak-trust', `attestation key is the public_key AWS signed for ${nitro.moduleId}`);
    },
    async validateCvm(doc, state, rec, callOptions) {
      const id = parseInstanceIdentity(doc.instanceInfo);
      if (typeof id === 'string') throw rec.fail('cvm', id);
      const nitro = verified.get(doc);
      // The SHA-256 quote verified against SHA256(instanceInfo ‖ extraData): its extraData is that nonce.
      if (nitro) checkNitroPcrs(doc, state.ak, state.quote.attest.extraData, state.quote.pcrs, nitro, rec);
      let support: string | undefined;
      try {
        support = await ec2.tpmSupport(id.region, id.imageId, callOptions);
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

/** Options of {@link createAwsNitroTpmIssuer}. */
export interface AwsNitroTpmIssuerOptions extends Omit<VtpmIssuerBaseOptions, 'tpm' | 'sha384Quoter'> {
  /** The NitroTPM: the AK, its SHA-256 quote and its SHA-384 quote. */
  tpm: Pick<Tpm, 'attestationKeyPublic' | 'quote'> & BankQuoter<'sha384'>;
  /** Reads the IMDS instance identity document (Go JSON). */
  instanceIdentity: (options?: CallOptions) => Promise<Uint8Array>;
  /** Asks the Nitro system for the signed NitroTPM attestation document. */
  nitroTpm: NitroTpmAttestor;
}

/**
 * The aws-nitro-tpm issuer: the instance info is the IMDS identity document plus AWS's NitroTPM
 * document for nonce = extraData and public_key = the AK; the quote covers SHA-256 and SHA-384.
 */
export function createAwsNitroTpmIssuer(options: AwsNitroTpmIssuerOptions): VtpmIssuer {
  const { tpm, instanceIdentity, nitroTpm, ...base } = options;
  return new VtpmIssuer({
    ...base,
    variant: 'aws-nitro-tpm',
    tpm,
    sha384Quoter: tpm,
    instanceInfo: async (extraData, callOptions) => {
      const identity: unknown = JSON.parse(Buffer.from(await instanceIdentity(callOptions)).toString('utf8'));
      if (typeof identity !== 'object' || identity === null || Array.isArray(identity))
        throw new ConfbootError('unavailable', 'the IMDS instance identity document is not a JSON object');
      const ak = parseTpmtPublic(await tpm.attestationKeyPublic(callOptions));
      const publicKey = ak.publicKey.export({ type: 'spki', format: 'der' });
      const document = await nitroTpm.attestationDocument({ nonce: extraData, publicKey }, callOptions);
      const info = { ...identity, [NITROTPM_DOCUMENT_FIELD]: Buffer.from(document).toString('base64') };
      return new TextEncoder().encode(JSON.stringify(info));
    },
  });
}
