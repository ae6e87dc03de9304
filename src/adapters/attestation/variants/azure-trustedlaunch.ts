/**
 * azure-trustedlaunch: InstanceInfo is Go JSON `{"AkCert": DER, "CA": DER}`; the AK
 * certificate must chain via CA to a CONFIGURED root (upstream embedded Microsoft's "ameroot", which
 * expired on 2026-05-24 — confboot embeds none), any EKU, at the injected clock's time; the AK must be
 * RSA and equal the certificate's public key. No CVM checks. The roots are checked when the checks
 * are built (node:crypto) and converted to @peculiar/x509 certificates on the first validation, so
 * building a validator does not load that library.
 */
import { createPublicKey, X509Certificate as NodeX509Certificate } from 'node:crypto';
import type { X509Certificate } from '@peculiar/x509';
import type { Clock } from '../../../ports/clock.js';
import { AttestationError, messageOf } from '../../../ports/errors.js';
import { TpmAlg } from '../../tpm/tpm2-wire.js';
import {
  certificateSpki,
  certName,
  parseCertificates,
  recordAsync,
  verifyCertificateChain,
} from '../shared/x509-chain.js';
import type { VtpmVariantChecks } from '../vtpm/validator.js';
import { sameKey } from '../vtpm/verify-attestation.js';

/** Configuration of azure-trustedlaunch validation. */
export interface AzureTrustedLaunchConfig {
  /** Trusted AK roots (PEM or DER, several PEM blocks allowed per entry). Required, never embedded. */
  akRoots: Array<Uint8Array | string>;
  /** Time source for certificate validity. */
  clock: Pick<Clock, 'now'>;
}

function parseInfo(raw: Uint8Array | undefined): { akCert: Uint8Array; ca: Uint8Array } | string {
  if (!raw) return 'InstanceInfo is missing (want {"AkCert","CA"})';
  let v: unknown;
  try {
    v = JSON.parse(Buffer.from(raw).toString('utf8'));
  } catch (err) {
    return `InstanceInfo is not JSON: ${messageOf(err)}`;
  }
  const o = v as { AkCert?: unknown; CA?: unknown };
  const b64 = /^[A-Za-z0-9+/]+={0,2}$/;
  if (typeof o?.AkCert !== 'string' || !b64.test(o.AkCert)) return 'InstanceInfo.AkCert is not base64 DER';
  if (typeof o.CA !== 'string' || !b64.test(o.CA)) return 'InstanceInfo.CA is not base64 DER';
  return { akCert: Buffer.from(o.AkCert, 'base64'), ca: Buffer.from(o.CA, 'base64') };
}

/** One configured root, checked with node:crypto: its DER and the name of its entry. */
interface CheckedRoot {
  der: Buffer;
  what: string;
}

/**
 * Parses one configured root entry (DER, or PEM with one or more blocks) with node:crypto.
 * @throws AttestationError `ak-certificate` "parsing `what`: …"
 */
function checkRoots(data: Uint8Array | string, what: string): CheckedRoot[] {
  try {
    const text = typeof data === 'string' ? data : Buffer.from(data).toString('latin1');
    const inputs = text.includes('-----BEGIN CERTIFICATE-----')
      ? (text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [])
      : [typeof data === 'string' ? Buffer.from(data, 'latin1') : Buffer.from(data)];
    return inputs.map((input) => ({ der: new NodeX509Certificate(input).raw, what }));
  } catch (err) {
    throw new AttestationError('ak-certificate', `parsing ${what}: ${messageOf(err)}`, { cause: err });
  }
}

/** The CVM step of azure-trustedlaunch: there is none (the AK certificate is the whole trust). */
export const azureTrustedLaunchCvmCheck: VtpmVariantChecks['validateCvm'] = async (_doc, _state, rec) => {
  rec.pass('cvm', 'azure-trustedlaunch has no CVM checks');
};

/**
 * Variant checks of azure-trustedlaunch.
 * @throws AttestationError (`ak-certificate`) when a configured root cannot be parsed
 * @throws Error when no root is configured (refuses to build a validator that trusts nothing)
 */
export function azureTrustedLaunchChecks(config: AzureTrustedLaunchConfig): VtpmVariantChecks {
  const checked = config.akRoots.flatMap((r, i) => checkRoots(r, `AK root ${i + 1}`));
  if (checked.length === 0)
    throw new Error('azure-trustedlaunch needs at least one configured AK root certificate');
  // The same roots as @peculiar/x509 certificates, made once on the first validation.
  let roots: Promise<X509Certificate[]> | undefined;
  const rootCertificates = async (): Promise<X509Certificate[]> =>
    (await Promise.all(checked.map((r) => parseCertificates(r.der, r.what)))).flat();
  return {
    async checkAk(doc, ak, _extraData, rec) {
      const info = parseInfo(doc.instanceInfo);
      if (typeof info === 'string') throw rec.fail('ak-trust', info);
      const [akCert] = (await recordAsync(rec, parseCertificates(info.akCert, 'InstanceInfo.AkCert'))) as [
        X509Certificate,
      ];
      const ca = await recordAsync(rec, parseCertificates(info.ca, 'InstanceInfo.CA'));
      roots ??= rootCertificates();
      const trusted = await recordAsync(rec, roots);
      const at = config.clock.now();
      try {
        await verifyCertificateChain(akCert, ca, trusted, at);
      } catch (err) {
        throw rec.fail('ak-certificate', `AK certificate: ${messageOf(err)}`, { cause: err });
      }
      rec.pass(
        'ak-certificate',
        `AK certificate ${certName(akCert)} chains to a configured root at ${at.toISOString()}`,
      );
      if (ak.type !== TpmAlg.RSA)
        throw rec.fail('ak-trust', 'untrusted attestation public key: azure-trustedlaunch AK must be RSA');
      const certKey = createPublicKey({ key: certificateSpki(akCert), format: 'der', type: 'spki' });
      if (!sameKey(ak, certKey)) {
        throw rec.fail(
          'ak-trust',
          'untrusted attestation public key: it differs from the AK certificate key',
        );
      }
      rec.pass('ak-trust', 'attestation key equals the AK certificate key');
    },
    validateCvm: azureTrustedLaunchCvmCheck,
  };
}
