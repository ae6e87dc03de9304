/**
 * azure-trustedlaunch (REFERENCE §4.2): InstanceInfo is Go JSON `{"AkCert": DER, "CA": DER}`; the AK
 * certificate must chain via CA to a CONFIGURED root (upstream embedded Microsoft's "ameroot", which
 * expired on 2026-05-24 — confboot embeds none), any EKU, at the injected clock's time; the AK must be
 * RSA and equal the certificate's public key. No CVM checks.
 */
import { createPublicKey } from 'node:crypto';
import type * as x509 from '@peculiar/x509';
import type { Clock } from '../../../ports/clock.js';
import { TpmAlg } from '../vtpm/tpm2.js';
import type { VtpmVariantChecks } from '../vtpm/validator.js';
import { sameKey } from '../vtpm/verify-attestation.js';
import { certificateSpki, certName, parseCertificates, verifyCertificateChain } from '../vtpm/x509-chain.js';

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
    return `InstanceInfo is not JSON: ${err instanceof Error ? err.message : String(err)}`;
  }
  const o = v as { AkCert?: unknown; CA?: unknown };
  const b64 = /^[A-Za-z0-9+/]+={0,2}$/;
  if (typeof o?.AkCert !== 'string' || !b64.test(o.AkCert)) return 'InstanceInfo.AkCert is not base64 DER';
  if (typeof o.CA !== 'string' || !b64.test(o.CA)) return 'InstanceInfo.CA is not base64 DER';
  return { akCert: Buffer.from(o.AkCert, 'base64'), ca: Buffer.from(o.CA, 'base64') };
}

/**
 * Variant checks of azure-trustedlaunch.
 * @throws Error when no root is configured (refuses to build a validator that trusts nothing)
 */
export function azureTrustedLaunchChecks(config: AzureTrustedLaunchConfig): VtpmVariantChecks {
  const roots: x509.X509Certificate[] = config.akRoots.flatMap((r, i) =>
    parseCertificates(r, `AK root ${i + 1}`),
  );
  if (roots.length === 0)
    throw new Error('azure-trustedlaunch needs at least one configured AK root certificate');
  return {
    async checkAk(doc, ak, _extraData, rec) {
      const info = parseInfo(doc.instanceInfo);
      if (typeof info === 'string') throw rec.fail('ak-trust', info);
      const akCert = rec.run(() =>
        parseCertificates(info.akCert, 'InstanceInfo.AkCert'),
      )[0] as x509.X509Certificate;
      const ca = rec.run(() => parseCertificates(info.ca, 'InstanceInfo.CA'));
      const at = config.clock.now();
      try {
        await verifyCertificateChain(akCert, ca, roots, at);
      } catch (err) {
        throw rec.fail(
          'ak-certificate',
          `AK certificate: ${err instanceof Error ? err.message : String(err)}`,
          { cause: err },
        );
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
    async validateCvm(_doc, _state, rec) {
      rec.pass('cvm', 'azure-trustedlaunch has no CVM checks');
    },
  };
}
