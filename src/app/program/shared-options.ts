/**
 * The options several commands share, defined once: the cloud, the attestation variant, the
 * attestation config, the log level and the output format. One flag per concept: `--cloud` and
 * `--variant`, with upstream's `--csp` and `--attestation-variant` kept as aliases.
 */
import type { Variant } from '../../ports/variant.js';
import { cloudNames, isCloud, isVariant, variantNames } from '../registry/index.js';
import { UsageError } from './args.js';
import { oneOf } from './options.js';

/** Reads a registered cloud name. */
export function parseCloud(raw: string, flag: string): string {
  if (!isCloud(raw)) throw new UsageError(`--${flag}: want one of ${cloudNames().join(', ')}, got "${raw}"`);
  return raw;
}

/** Reads a registered (production) attestation variant; `dummy` is for tests only. */
export function parseVariant(raw: string, flag: string): Variant {
  if (!isVariant(raw))
    throw new UsageError(
      `--${flag}: want one of ${variantNames().join(', ')}, got "${raw}"${raw === 'dummy' ? ' (dummy is for tests only)' : ''}`,
    );
  return raw;
}

/**
 * `--cloud C` (also `--csp`). `what` ends the help line ("cloud provider", "cloud of the bring-up's
 * manifests"); `note` is added after the list of clouds.
 */
export function cloudOption<const R extends boolean>(o: { required: R; what?: string; note?: string }) {
  return {
    type: 'string',
    valueName: 'C',
    required: o.required,
    aliases: ['csp'],
    parse: parseCloud,
    // Read when --help is printed, so every cloud of the registry is listed.
    get description() {
      return `${o.what ?? 'cloud provider'}: ${cloudNames().join(', ')}${o.note ?? ''}`;
    },
  } as const;
}

/**
 * `--variant V` (also `--attestation-variant`). `what` says whose variant it is; `names` lists the
 * variants the command takes (default every registered one), read when --help is printed.
 */
export function variantOption<const R extends boolean>(o: {
  required: R;
  what: string;
  note?: string;
  names?: () => readonly string[];
}) {
  return {
    type: 'string',
    valueName: 'V',
    required: o.required,
    aliases: ['attestation-variant'],
    parse: parseVariant,
    get description() {
      return `${o.what}: ${(o.names ?? variantNames)().join(', ')}${o.note ?? ''}`;
    },
  } as const;
}

/** {@link variantOption} with a default variant. */
export function variantOptionWithDefault<const D extends string>(o: {
  default: D;
  what: string;
  note?: string;
  names?: () => readonly string[];
}) {
  const option = variantOption({ required: false, ...o });
  return {
    type: option.type,
    valueName: option.valueName,
    aliases: option.aliases,
    parse: option.parse,
    default: o.default,
    get description() {
      return option.description;
    },
  } as const;
}

/** `--attestation-config F`: measurements, and for SEV-SNP/TDX their policy and trust anchors. */
export function attestationConfigOption<const R extends boolean>(o: { required: R; note?: string }) {
  return {
    type: 'string',
    valueName: 'F',
    required: o.required,
    description: `attestation config JSON: measurements, and for SEV-SNP/TDX their policy and trust anchors (docs/attestation-config.md)${o.note ?? ''}`,
  } as const;
}

/** The pino log levels. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;

/** A pino log level. */
export type LogLevel = (typeof LOG_LEVELS)[number];

/** `--log-level L`, default info. */
export const LOG_LEVEL_OPTION = {
  type: 'string',
  valueName: 'L',
  default: 'info',
  description: `log level: ${LOG_LEVELS.join(', ')}`,
  parse: oneOf(LOG_LEVELS),
} as const;

/**
 * `--master-secret-file F` (required, a secret file): the master secret `confboot init` wrote, for the
 * commands that derive from it (`recovery-shares`, `ssh`).
 */
export const MASTER_SECRET_FILE_OPTION = {
  type: 'string',
  valueName: 'F',
  secret: 'file',
  description: 'JSON {"key","salt"} (base64) that confboot init wrote',
  required: true,
} as const;

/** The output formats of a command that prints a result. */
export const OUTPUT_FORMATS = ['table', 'json'] as const;

/** `table` (for people) or `json` (one envelope, see output.ts). */
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** `-o table|json` (also `--json`), default table. */
export const OUTPUT_OPTION = {
  type: 'string',
  short: 'o',
  valueName: 'table|json',
  default: 'table',
  aliases: [{ flag: 'json', sets: 'json' }],
  description: 'output: table (text for people) or json (one envelope {command, status, exitCode, result})',
  parse: oneOf(OUTPUT_FORMATS),
} as const;

/**
 * `--cloud-api-endpoint URL` of the commands that render or apply the manifests: the cloud API
 * endpoint a cloud's join service needs and only the operator knows (OpenStack's Nova), written into
 * ConfigMap join-config. An https URL.
 */
export const DEPLOY_CLOUD_API_ENDPOINT_OPTION = {
  type: 'string',
  valueName: 'URL',
  description:
    'openstack: the Nova compute endpoint the join service asks (join-config key cloudApiEndpoint; without it the join service does not start)',
  parse: (raw: string, flag: string): string => {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new UsageError(`--${flag}: not a URL: "${raw}"`);
    }
    if (url.protocol !== 'https:') throw new UsageError(`--${flag}: want an https URL, got "${raw}"`);
    return raw;
  },
} as const;

/** A cluster ID written as text: 64 hex digits (32 bytes). */
export const CLUSTER_ID_HEX = /^[0-9a-fA-F]{64}$/;

/** `parse` for a 32-byte cluster ID given in hex (`--cluster-id`). */
export function parseClusterIdHex(raw: string, flag: string): Uint8Array {
  if (!CLUSTER_ID_HEX.test(raw)) throw new UsageError(`--${flag}: want 64 hex digits, got "${raw}"`);
  return new Uint8Array(Buffer.from(raw, 'hex'));
}
