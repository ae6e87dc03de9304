/**
 * qemu-vtpm: by default the attestation key is trusted as it is carried in the
 * document and there are no CVM checks. The quote still has to verify with that key and the
 * measurements still have to match, which is what makes a QEMU node's attestation meaningful.
 *
 * That default lets any swtpm mint a valid document. With {@link QemuVtpmOptions.akTrust} (on in
 * `confboot mini`, where the host provisions every VM's TPM and registers its AK before boot, the
 * way GCE publishes a shielded VM's identity) the document's AK must be the one registered for the
 * attester — the machine calling, as the registry finds it (e.g. by the connection's source
 * address) — compared as the exact TPMT_PUBLIC bytes; any other AK fails the `ak-trust` check.
 */
import type { AkRegistry } from '../../../ports/ak-registry.js';
import type { VtpmVariantChecks } from '../vtpm/validator.js';

/** Options of {@link qemuVtpmChecksWith}. */
export interface QemuVtpmOptions {
  /** Refuse documents whose AK is not the attester's registered one. */
  akTrust?: AkRegistry;
}

/** Variant checks of qemu-vtpm, trusting the AK as carried (upstream's behaviour). */
export const qemuVtpmChecks: VtpmVariantChecks = qemuVtpmChecksWith({});

/** Variant checks of qemu-vtpm with the given options. */
export function qemuVtpmChecksWith(options: QemuVtpmOptions): VtpmVariantChecks {
  return {
    async checkAk(doc, _ak, _extraData, rec, callOptions) {
      const registry = options.akTrust;
      if (registry === undefined) {
        rec.pass('ak-trust', 'qemu-vtpm trusts the attestation key as carried in the document');
        return;
      }
      const { attester, akPub } = await registry.registeredAk(callOptions);
      if (akPub === undefined) throw rec.fail('ak-trust', `no attestation key is registered for ${attester}`);
      if (!Buffer.from(doc.attestation.akPub).equals(Buffer.from(akPub)))
        throw rec.fail(
          'ak-trust',
          `the document's attestation key is not the one registered for ${attester}`,
        );
      rec.pass('ak-trust', `attestation key is the one registered for ${attester}`);
    },
    async validateCvm(_doc, _state, rec) {
      rec.pass('cvm', 'qemu-vtpm has no CVM checks');
    },
  };
}
