/**
 * The registries of clouds and attestation variants, joined (app layer, composition). Everything
 * that lists or checks a cloud or a variant asks here: the node config, the bootstrapper's and the
 * join service's flags and `--help`, `confboot init`, the join service's metadata and validators,
 * and the manifest generator. A cloud runs the variants that name it in the variant registry, in
 * registry order (the first is its default), then those its own entry adopts.
 *
 * {@link registerCloud} and {@link registerVariant} add an entry at run time, for a test that proves
 * a new cloud or variant shows up everywhere (test/app/registry/template.test.ts).
 */
import { ConfbootError } from '../../ports/errors.js';
import type { Logger } from '../../ports/logger.js';
import type { MetadataAPI } from '../../ports/metadata-api.js';
import type { Variant } from '../../ports/variant.js';
import type { CloudEntry, CloudMetadataSettings } from './cloud-entry.js';
import { CLOUDS } from './clouds.js';
import { type Csp, type NodeConfig, type NodeConfigInput, withNodeDefaults } from './node-config.js';
import type { VariantEntry } from './variant-entry.js';
import { DUMMY_OID, VARIANTS } from './variants.js';

export {
  type CloudEntry,
  type CloudMetadataSettings,
  type CloudOptions,
  type CloudTpmOptions,
  cloud,
  DEFAULT_CLOUD_API_TOKEN_PATH,
  definedOnly,
  LazyMetadataAPI,
  type ProviderSettings,
  providerSettings,
} from './cloud-entry.js';
export { AZURE_TPM_OPTIONS, CLOUDS, GCE_TPM_OPTIONS } from './clouds.js';
export * from './node-config.js';
export type { IssuerContext } from './node-issuers.js';
export type { VariantEntry, VtpmValidatorFactory } from './variant-entry.js';
export { DUMMY_OID, VARIANTS } from './variants.js';
export { type VtpmVariantSpec, vtpmVariant } from './vtpm-variant.js';

const DUMMY = 'the dummy attestation variant is for tests only and cannot be configured';

/** Every cloud name, in registry order. */
export function cloudNames(): string[] {
  return Object.keys(CLOUDS);
}

/** Every variant name production can select, in registry order (`dummy` is not among them). */
export function variantNames(): Variant[] {
  return Object.keys(VARIANTS) as Variant[];
}

/** Variants of one kind (vTPM, SEV-SNP or TDX), in registry order. */
export function variantsOfKind(...kinds: VariantEntry['kind'][]): Variant[] {
  return variantNames().filter((v) => kinds.includes(variantEntry(v).kind));
}

/** Whether `name` is a registered cloud. */
export function isCloud(name: string): boolean {
  return Object.hasOwn(CLOUDS, name);
}

/** Whether `name` is a registered (production) variant. */
export function isVariant(name: string): name is Variant {
  return Object.hasOwn(VARIANTS, name);
}

/** Parses a cloud name; throws `invalid-argument` naming the accepted ones. */
export function cspFromString(name: string): Csp {
  if (isCloud(name)) return name;
  throw new ConfbootError(
    'invalid-argument',
    `unknown cloud ${JSON.stringify(name)} (want one of ${cloudNames().join(', ')})`,
  );
}

/** The entry of cloud `csp`; throws `invalid-argument` for an unknown one. */
export function cloudEntry(csp: string): CloudEntry {
  return CLOUDS[cspFromString(csp)] as CloudEntry;
}

/** The entry of variant `name`; throws `invalid-argument` for `dummy` and unknown names. */
export function variantEntry(name: string): VariantEntry {
  if (name === 'dummy') throw new ConfbootError('invalid-argument', DUMMY);
  if (!isVariant(name))
    throw new ConfbootError(
      'invalid-argument',
      `unknown attestation variant ${JSON.stringify(name)} (want one of ${variantNames().join(', ')})`,
    );
  return VARIANTS[name] as VariantEntry;
}

/** The OID variant `name` attests under in attested TLS (its entry's; `dummy`'s for the test fakes). */
export function variantOid(name: Variant): string {
  return name === 'dummy' ? DUMMY_OID : variantEntry(name).oid;
}

/** The variant (registered, or `dummy`) whose documents travel under `oid`, or undefined. */
export function variantOfOid(oid: string): string | undefined {
  if (oid === DUMMY_OID) return 'dummy';
  return Object.keys(VARIANTS).find((name) => VARIANTS[name]?.oid === oid);
}

/** The variants a node of `csp` runs (issues, and its join service validates); the default first. */
export function cloudVariants(csp: string): Variant[] {
  const own = variantNames().filter((v) => variantEntry(v).clouds.includes(csp));
  const adopted = (cloudEntry(csp).variants ?? []).filter((v) => !own.includes(v as Variant));
  return [...own, ...(adopted as Variant[])];
}

/** The clouds whose nodes run `variant`, in registry order. */
export function variantClouds(variant: string): string[] {
  return cloudNames().filter((c) => cloudVariants(c).includes(variant as Variant));
}

/** The MetadataAPI of cloud `csp` (its adapter and SDK load only when the API first calls the cloud). */
export async function cloudMetadataApi(
  csp: string,
  metadata: CloudMetadataSettings['metadata'],
  logger: Logger,
): Promise<MetadataAPI> {
  return cloudEntry(csp).metadataApi({ csp, metadata }, logger);
}

/**
 * Builds and checks a {@link NodeConfig}. Throws `invalid-argument` for an unknown cloud, for the
 * test-only `dummy` variant and for a variant the cloud does not run.
 */
export function nodeConfig(input: NodeConfigInput): NodeConfig {
  const csp = cspFromString(input.csp);
  const offered = cloudVariants(csp);
  if (input.variant === 'dummy' || !isVariant(input.variant))
    throw new ConfbootError(
      'invalid-argument',
      `attestation variant ${JSON.stringify(input.variant)} cannot be used by a node (want one of ${offered.join(', ')})`,
    );
  if (!offered.includes(input.variant))
    throw new ConfbootError(
      'invalid-argument',
      `attestation variant ${input.variant} is not available on ${csp} (want one of ${offered.join(', ')})`,
    );
  return withNodeDefaults(input, csp, input.variant);
}

/** Adds `entry` under `name` until the returned function is called (for tests). */
function register<E>(table: Record<string, E>, what: string, name: string, entry: E): () => void {
  if (Object.hasOwn(table, name)) throw new Error(`${what} ${name} is already registered`);
  table[name] = entry;
  return () => {
    delete table[name];
  };
}

/** Registers a cloud at run time; returns the function that removes it again. */
export function registerCloud(name: string, entry: CloudEntry): () => void {
  return register(CLOUDS, 'cloud', name, entry);
}

/** Registers a variant at run time (under an OID no other variant has); returns the function that removes it again. */
export function registerVariant(name: string, entry: VariantEntry): () => void {
  const holder = variantOfOid(entry.oid);
  if (holder !== undefined) throw new Error(`attestation variant ${name}: OID ${entry.oid} is ${holder}'s`);
  return register(VARIANTS, 'attestation variant', name, entry);
}
