/**
 * The attestation contract for the vTPM validator: with the soft TPM (RSA and ECC attestation keys,
 * genuine TPM structures) and with the real vTPM issuer on a real swtpm. Tampering targets the bytes
 * the quote's signature and digest cover: the TPMS_ATTEST, the TPMT_SIGNATURE, a quoted PCR value,
 * the AK, and the user data.
 */
import { createHash } from 'node:crypto';
import { createQemuVtpmIssuer } from '../../../../src/adapters/attestation/vtpm/issuer.js';
import { startSwtpm } from '../../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { createValidator } from '../../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../../src/domain/measurements.js';
import type { Validator } from '../../../../src/ports/validator.js';
import { type AttestationSeed, describeAttestationContract } from '../../../contract/attestation.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../../../support/soft-tpm.js';
import { vtpmQuoteTampers } from './tampers.js';

const pcr4 = createHash('sha256').update('image').digest();
const policy = new MeasurementsPolicy(
  new Map([
    [4, { expected: pcr4, warnOnly: false }],
    [15, { expected: Buffer.alloc(32), warnOnly: false }],
  ]),
);

/** A validator of another variant (gcp-sev-es): refuses a qemu-vtpm document, which has no GCE instance info. */
function foreignValidator(): Validator {
  return createValidator('gcp-sev-es', {
    policy,
    gceShieldedIdentity: { signingKeyPem: async () => SoftTpm.create({ key: 'ecc' }).akPublicKeyPem() },
  });
}

function vtpmSeed(otherAk: Uint8Array): AttestationSeed {
  return { foreignValidator: foreignValidator(), tamper: (doc) => vtpmQuoteTampers(doc, otherAk) };
}

const otherAk = SoftTpm.create().akPublic;

for (const key of ['rsa', 'ecc'] as const) {
  const tpm = SoftTpm.create({ key });
  tpm.setPcr(SHA256, 4, pcr4);
  describeAttestationContract(`qemu-vtpm, soft TPM (${key})`, async () => ({
    subject: { issuer: new SoftVtpmIssuer(tpm), validator: createValidator('qemu-vtpm', { policy }) },
    seed: vtpmSeed(otherAk),
    cleanup: async () => {},
    supports: { concurrentValidation: true },
  }));
}

describeAttestationContract('qemu-vtpm, real issuer on swtpm', async () => {
  const sw = await startSwtpm();
  try {
    const tpm = new Tpm2ToolsTpm({ tcti: sw.tcti });
    const pcrs = await tpm.readPcrs([4, 15]);
    const swPolicy = new MeasurementsPolicy(
      new Map([...pcrs].map(([i, v]) => [i, { expected: Buffer.from(v), warnOnly: false }] as const)),
    );
    return {
      subject: {
        issuer: createQemuVtpmIssuer(tpm),
        validator: createValidator('qemu-vtpm', { policy: swPolicy }),
      },
      seed: vtpmSeed(otherAk),
      cleanup: () => sw.stop(),
      supports: { concurrentValidation: true },
    };
  } catch (err) {
    await sw.stop();
    throw err;
  }
});
