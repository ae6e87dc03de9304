/**
 * Attestation variants and their upstream OIDs (under 1.3.9900). The OID is the X.509 extension
 * OID under which the attestation document travels in attested TLS, and it names the variant on the wire.
 */

/** Every variant confboot knows, as upstream's `variant.FromString` strings. */
export const VARIANT_OIDS = {
  dummy: '1.3.9900.1.1',
  'aws-nitro-tpm': '1.3.9900.2.1',
  'aws-sev-snp': '1.3.9900.2.2',
  'gcp-sev-es': '1.3.9900.3.1',
  'gcp-sev-snp': '1.3.9900.3.2',
  'azure-sev-snp': '1.3.9900.4.1',
  'azure-trustedlaunch': '1.3.9900.4.2',
  'azure-tdx': '1.3.9900.4.3',
  'qemu-vtpm': '1.3.9900.5.1',
  'qemu-tdx': '1.3.9900.5.99',
} as const;

/** A variant name such as `qemu-vtpm`. */
export type Variant = keyof typeof VARIANT_OIDS;

/** Variants that production wiring and CLI flags may select (`dummy` is for tests only). */
export const PRODUCTION_VARIANTS = (Object.keys(VARIANT_OIDS) as Variant[]).filter((v) => v !== 'dummy');

/** Parses a variant name; throws on anything else, like upstream ("unknown OID"). */
export function variantFromString(name: string): Variant {
  if (Object.hasOwn(VARIANT_OIDS, name)) return name as Variant;
  throw new Error(`unknown attestation variant ${JSON.stringify(name)}`);
}

/** Returns the variant of an OID, or undefined. */
export function variantFromOid(oid: string): Variant | undefined {
  for (const [name, o] of Object.entries(VARIANT_OIDS)) if (o === oid) return name as Variant;
  return undefined;
}
