/**
 * The attestation contract for the vTPM validator: with the soft TPM (RSA and ECC attestation keys,
 * genuine TPM structures) and with the real vTPM issuer on a real swtpm. Tampering targets the bytes
 * the quote's signature and digest cover: the TPMS_ATTEST, the TPMT_SIGNATURE, a quoted PCR value,
 * the AK, and the user data.
 */
import { createHash } from 'node:crypto';
import { createValidator } from '../../../../src/adapters/attestation/variants/factory.js';
import {
  decodeVtpmDocument,
  encodeVtpmDocument,
  type VtpmDocument,
} from '../../../../src/adapters/attestation/vtpm/attestation.js';
import { createQemuVtpmIssuer } from '../../../../src/adapters/attestation/vtpm/issuer.js';
import { startSwtpm } from '../../../../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { MeasurementsPolicy } from '../../../../src/domain/measurements.js';
import type { Validator } from '../../../../src/ports/validator.js';
import {
  type AttestationSeed,
  describeAttestationContract,
  flipByteAt,
} from '../../../contract/attestation.js';
import { SHA256, SoftTpm, SoftVtpmIssuer } from '../../../support/soft-tpm.js';

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

function edit(doc: Uint8Array, f: (d: VtpmDocument) => void): Uint8Array {
  const d = decodeVtpmDocument(doc);
  f(d);
  return encodeVtpmDocument(d);
}

function sha256Quote(d: VtpmDocument) {
  const q = d.attestation.quotes.find((x) => x.pcrHashAlg === SHA256);
  if (!q) throw new Error('document has no SHA-256 quote');
  return q;
}

function vtpmSeed(otherAk: Uint8Array): AttestationSeed {
  return {
    foreignValidator: foreignValidator(),
    tamper: (doc) => [
      ...[6, 40, 60, 90].map((i) => ({
        what: `TPMS_ATTEST byte ${i}`,
        document: edit(doc, (d) => {
          const q = sha256Quote(d);
          q.quote = flipByteAt(q.quote, Math.min(i, q.quote.length - 1));
        }),
      })),
      ...[2, 10, 100].map((i) => ({
        what: `TPMT_SIGNATURE byte ${i}`,
        document: edit(doc, (d) => {
          const q = sha256Quote(d);
          q.rawSig = flipByteAt(q.rawSig, Math.min(i, q.rawSig.length - 1));
        }),
      })),
      {
        what: 'PCR 4 value',
        document: edit(doc, (d) => {
          const q = sha256Quote(d);
          q.pcrs.set(4, flipByteAt(q.pcrs.get(4) as Uint8Array, 0));
        }),
      },
      {
        what: 'AK replaced',
        document: edit(doc, (d) => {
          d.attestation.akPub = otherAk;
        }),
      },
      {
        what: 'user data byte 0',
        document: edit(doc, (d) => {
          d.userData = flipByteAt(d.userData, 0);
        }),
      },
    ],
  };
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
