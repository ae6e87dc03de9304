/**
 * Attestation variant names. Each production variant's OID (the X.509 extension OID under which its
 * attestation document travels in attested TLS) is declared by its registry entry and handed to the
 * adapters by the composition.
 */

/** Every variant confboot knows, as upstream's `variant.FromString` strings. */
export const VARIANT_NAMES = [
  'dummy',
  'aws-nitro-tpm',
  'aws-sev-snp',
  'gcp-sev-es',
  'gcp-sev-snp',
  'azure-sev-snp',
  'azure-trustedlaunch',
  'azure-tdx',
  'qemu-vtpm',
  'qemu-tdx',
] as const;

/** A variant name such as `qemu-vtpm`. */
export type Variant = (typeof VARIANT_NAMES)[number];

/** Variants that production wiring and CLI flags may select (`dummy` is for tests only). */
export const PRODUCTION_VARIANTS = VARIANT_NAMES.filter((v) => v !== 'dummy');

/** Whether `name` is a variant name. */
export function isVariantName(name: string): name is Variant {
  return (VARIANT_NAMES as readonly string[]).includes(name);
}

/** Parses a variant name; throws on anything else, like upstream ("unknown OID"). */
export function variantFromString(name: string): Variant {
  if (isVariantName(name)) return name;
  throw new Error(`unknown attestation variant ${JSON.stringify(name)}`);
}
