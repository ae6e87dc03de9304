/**
 * TPMT_PUBLIC attestation-key templates marshalled by hand (TPM 2.0 part 2, 12.2.4), as GCE stores
 * them in vTPM NV memory (go-tpm-tools' AKTemplateRSA / AKTemplateECC). Shared by the NV-template AK
 * test on a real swtpm and the fuzz properties of the template parser.
 */

/** fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|restricted|sign */
export const AK_SIGNER_ATTRIBUTES = 0x00050072;

/** An RSA-2048 RSASSA-SHA256 template; defaults: {@link AK_SIGNER_ATTRIBUTES}, empty unique and policy. */
export function rsaAkTemplate(
  opts: { attributes?: number; unique?: Uint8Array; policy?: Uint8Array } = {},
): Buffer {
  const unique = Buffer.from(opts.unique ?? new Uint8Array(0));
  const policy = Buffer.from(opts.policy ?? new Uint8Array(0));
  const b = Buffer.alloc(8 + 2 + policy.length + 12 + 2 + unique.length);
  let o = b.writeUInt16BE(0x0001, 0); // TPM_ALG_RSA
  o = b.writeUInt16BE(0x000b, o); // nameAlg SHA-256
  o = b.writeUInt32BE(opts.attributes ?? AK_SIGNER_ATTRIBUTES, o);
  o = b.writeUInt16BE(policy.length, o);
  o += policy.copy(b, o);
  o = b.writeUInt16BE(0x0010, o); // symmetric NULL
  o = b.writeUInt16BE(0x0014, o); // RSASSA
  o = b.writeUInt16BE(0x000b, o); // SHA-256
  o = b.writeUInt16BE(2048, o);
  o = b.writeUInt32BE(0, o); // exponent: default
  o = b.writeUInt16BE(unique.length, o);
  unique.copy(b, o);
  return b;
}

/** go-tpm-tools' AKTemplateECC shape: NIST P-256, ECDSA-SHA256, 32 zero bytes per coordinate. */
export function eccAkTemplate(): Buffer {
  const point = Buffer.concat([Buffer.from([0, 32]), Buffer.alloc(32)]);
  const head = Buffer.from('0023000b000500720000' + '0010' + '0018000b' + '0003' + '0010', 'hex');
  return Buffer.concat([head, point, point]);
}
