/**
 * qemu-vtpm (REFERENCE §4.2): the attestation key is trusted as it is carried in the document and
 * there are no CVM checks. The quote still has to verify with that key and the measurements still
 * have to match, which is what makes a QEMU node's attestation meaningful.
 */
import type { VtpmVariantChecks } from '../vtpm/validator.js';

/** Variant checks of qemu-vtpm. */
export const qemuVtpmChecks: VtpmVariantChecks = {
  async checkAk(_doc, _ak, _extraData, rec) {
    rec.pass('ak-trust', 'qemu-vtpm trusts the attestation key as carried in the document');
  },
  async validateCvm(_doc, _state, rec) {
    rec.pass('cvm', 'qemu-vtpm has no CVM checks');
  },
};
