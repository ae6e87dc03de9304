/**
 * `confboot attestation verify`: verifies one vTPM attestation offline and prints the verdict, every
 * check performed and every measurement mismatch as expected vs actual.
 *   --format json (default): upstream's Go-JSON attestation document of variant V; --nonce is the
 *     verifier's nonce and extraData = SHA256(UserData‖nonce) applies.
 *   --format pb: a raw go-tpm-tools Attestation protobuf; --nonce is the quote's qualifying data as is;
 *     the AK is trusted through its AK certificate chaining to --ak-roots (roots and intermediates) at
 *     --at, or through --trusted-ak.
 * A qemu-vtpm json document is trusted as the join service trusts it: its AK must be --trusted-ak, or
 * the one --qemu-ak-registry registers for --peer-address (the address it came from); without either
 * the command refuses to run (exit 2) unless --trust-ak-as-carried (SECURITY line on stderr).
 * Exit 0 accepted, 1 rejected, 2 usage or input error. The dispatcher registers this module's
 * run() as the `verify` verb of `confboot attestation`; a leading `verify` argument is also accepted.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { parseCertificates } from '../../adapters/attestation/shared/x509-chain.js';
import { verifyRawAttestation } from '../../adapters/attestation/vtpm/raw-attestation.js';
import { Ec2AmiTpmSupport } from '../../adapters/cloud/aws/ami-tpm-support.js';
import { ComputeShieldedIdentity } from '../../adapters/cloud/gcp/shielded-identity.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { MeasurementsPolicy, parseAttestationConfig } from '../../domain/measurements.js';
import type { Clock } from '../../ports/clock.js';
import { isAttestationError, messageOf } from '../../ports/errors.js';
import type { MeasurementPolicy } from '../../ports/measurement-policy.js';
import { formatMismatch } from '../../ports/measurement-policy.js';
import type { AttestationCheck, MeasurementMismatch } from '../../ports/types.js';
import type { Validator } from '../../ports/validator.js';
import { runCommand, UsageError } from '../program/args.js';
import { readInput } from '../program/input-file.js';
import { defineCommand, type OptionValues, oneOf, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { OUTPUT_OPTION, variantOptionWithDefault } from '../program/shared-options.js';
import { variantEntry, variantsOfKind } from '../registry/index.js';
import type { VariantLookups } from '../registry/validator-deps.js';
import {
  akTrustSettings,
  operatorLookups,
  QEMU_AK_REGISTRY_OPTION,
  TRUST_AK_AS_CARRIED_OPTION,
} from './operator-inputs.js';

/** Flags of `confboot attestation verify`. */
export const attestationVerifyCommand = defineCommand({
  name: 'attestation verify',
  summary:
    'Verify a vTPM attestation (upstream JSON document or raw go-tpm-tools protobuf) and list every check.',
  options: {
    document: { type: 'string', valueName: 'F', required: true, description: 'the attestation document' },
    format: {
      type: 'string',
      valueName: 'json|pb',
      default: 'json',
      description: 'document format',
      parse: oneOf(['json', 'pb']),
    },
    variant: variantOptionWithDefault({
      default: 'qemu-vtpm',
      what: 'variant of a json document',
      names: () => variantsOfKind('vtpm'),
    }),
    nonce: {
      type: 'string',
      valueName: 'HEX',
      default: '',
      description: "json: the verifier's nonce; pb: the quote's qualifying data as is (default empty)",
    },
    config: {
      type: 'string',
      valueName: 'F',
      description:
        'expected measurements: {"<idx>": {"expected", "warnOnly"}} or an attestation config holding them',
    },
    'ak-roots': {
      type: 'string',
      valueName: 'F',
      multiple: true,
      description: 'AK certificate roots and intermediates, PEM or DER (pb; azure-trustedlaunch); repeatable',
    },
    'trusted-ak': {
      type: 'string',
      valueName: 'F',
      description: 'PEM public key the attestation key must equal (replaces certificate or cloud AK trust)',
    },
    'qemu-ak-registry': QEMU_AK_REGISTRY_OPTION,
    'peer-address': {
      type: 'string',
      valueName: 'IP',
      description:
        'with --qemu-ak-registry: the address the document came from (its registered AK is required)',
    },
    'trust-ak-as-carried': TRUST_AK_AS_CARRIED_OPTION,
    at: {
      type: 'string',
      valueName: 'RFC3339',
      description: 'time at which certificates must be valid (default now)',
    },
    output: OUTPUT_OPTION,
  },
  epilog: [
    'gcp-sev-es asks the GCE API for the instance identity unless --trusted-ak is given; aws-nitro-tpm asks EC2',
    "for the AMI (both with the SDKs' default credentials).",
  ].join('\n'),
  exitCodes: { 0: 'accepted', 1: 'rejected' },
});

/** The parsed flags of `confboot attestation verify` that {@link verifyFromFlags} reads. */
export type VerifyFlags = Pick<
  OptionValues<typeof attestationVerifyCommand.options>,
  'document' | 'format' | 'variant' | 'nonce'
> &
  Partial<OptionValues<typeof attestationVerifyCommand.options>>;

/** The outcome printed by the command. */
export interface VerifyReport {
  verdict: 'accepted' | 'rejected';
  format: 'json' | 'pb';
  variant?: string;
  /** The failed check's name when rejected. */
  failedCheck?: string;
  reason?: string;
  checks: AttestationCheck[];
  mismatches: Array<{ index: number; expected: string; actual: string | null; warnOnly: boolean }>;
  /** Hex of the bound user data (json format, accepted). */
  userData?: string;
}

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function parseHex(value: string, flag: string): Buffer {
  if (!/^(?:[0-9a-fA-F]{2})*$/.test(value)) throw new UsageError(`${flag}: not an even-length hex string`);
  return Buffer.from(value, 'hex');
}

function parseAt(value: string | undefined): Date {
  if (value === undefined) return new Date();
  const rfc3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
  const d = new Date(value);
  if (!rfc3339.test(value) || Number.isNaN(d.getTime()))
    throw new UsageError(`--at: not an RFC 3339 time: ${value}`);
  return d;
}

/** A policy that compares nothing, for runs without --config. */
const NO_MEASUREMENTS: MeasurementPolicy = { compare: () => [] };

async function loadPolicy(path: string | undefined): Promise<MeasurementPolicy | undefined> {
  if (path === undefined) return undefined;
  const text = (await readInput(path, 'measurements config')).toString('utf8');
  try {
    return new MeasurementsPolicy(parseAttestationConfig(text).sets);
  } catch (err) {
    throw new UsageError(`--config ${path}: ${messageOf(err)}`);
  }
}

async function loadTrustedAk(path: string | undefined): Promise<KeyObject | undefined> {
  if (path === undefined) return undefined;
  const pem = await readInput(path, 'trusted AK');
  try {
    return createPublicKey(pem);
  } catch (err) {
    throw new UsageError(`--trusted-ak ${path}: not a PEM public key: ${messageOf(err)}`);
  }
}

async function loadRoots(paths: string[]): Promise<Awaited<ReturnType<typeof parseCertificates>>> {
  const out: Awaited<ReturnType<typeof parseCertificates>> = [];
  for (const p of paths) {
    const data = await readInput(p, 'AK root');
    try {
      out.push(...(await parseCertificates(data, p)));
    } catch (err) {
      throw new UsageError(`--ak-roots ${p}: ${messageOf(err)}`);
    }
  }
  return out;
}

function mismatchRows(ms: MeasurementMismatch[]): VerifyReport['mismatches'] {
  return ms.map((m) => ({
    index: m.index,
    expected: hex(m.expected),
    actual: m.actual ? hex(m.actual) : null,
    warnOnly: m.warnOnly,
  }));
}

/** Replaces the detail of the measurements check when no expectations were given. */
function noteNoConfig(checks: AttestationCheck[], policyGiven: boolean): AttestationCheck[] {
  if (policyGiven) return checks;
  return checks.map((c) =>
    c.name === 'measurements' ? { ...c, detail: 'not compared (no --config given)' } : c,
  );
}

/**
 * Builds the json-format validator of vTPM variant `variant` through its registry entry, honouring
 * --trusted-ak and --ak-roots. The cloud lookups (GCE, EC2) load their SDKs on first use only.
 */
function jsonValidator(
  variant: string,
  policy: MeasurementPolicy,
  trustedAk: KeyObject | undefined,
  roots: Awaited<ReturnType<typeof parseCertificates>>,
  at: Date,
  lookups: VariantLookups,
): Validator {
  const factory = variantEntry(variant).vtpm;
  if (factory === undefined) throw new UsageError(`--variant ${variant} is not a vTPM variant`);
  const system = new SystemClock();
  const clock: Clock = { now: () => at, sleep: (ms, signal) => system.sleep(ms, signal) };
  const deps = {
    clock,
    amiTpmSupport: new Ec2AmiTpmSupport(),
    gceShieldedIdentity: new ComputeShieldedIdentity(),
    ...(roots.length > 0 ? { azureAkRoots: roots.map((r) => r.toString('pem')) } : {}),
    ...lookups,
  };
  try {
    return factory.validator(policy, deps, trustedAk && { key: trustedAk, name: '--trusted-ak' });
  } catch (err) {
    if (isAttestationError(err)) throw err;
    throw new UsageError(
      `cannot build the ${variant} validator: ${messageOf(err)}${roots.length === 0 && !trustedAk ? ' (--ak-roots or --trusted-ak give AK trust)' : ''}`,
    );
  }
}

/**
 * qemu-vtpm's AK trust without --trusted-ak, by the join service's rule ({@link operatorLookups}):
 * the registry (which needs --peer-address), else a usage error unless --trust-ak-as-carried.
 */
async function qemuAkTrust(values: VerifyFlags): Promise<{ lookups: VariantLookups; peerAddress?: string }> {
  const peerAddress = values['peer-address'];
  if (values['qemu-ak-registry'] !== undefined && peerAddress === undefined)
    throw new UsageError(
      '--qemu-ak-registry needs --peer-address: the AK registered for that address is the one accepted',
    );
  try {
    const lookups = await operatorLookups(
      'qemu-vtpm',
      akTrustSettings({
        'qemu-ak-registry': values['qemu-ak-registry'],
        'trust-ak-as-carried': values['trust-ak-as-carried'] === true,
        'azure-ak-roots': undefined,
      }),
      'attestation verify',
    );
    return peerAddress === undefined ? { lookups } : { lookups, peerAddress };
  } catch (err) {
    if (err instanceof UsageError) throw new UsageError(`${err.message}; or pin the key with --trusted-ak`);
    throw err;
  }
}

/** Verifies as the flags say; returns the report (never throws for a rejection). */
export async function verifyFromFlags(values: VerifyFlags): Promise<VerifyReport> {
  const { format, variant } = values;
  if (format === 'json' && !variantsOfKind('vtpm').some((v) => v === variant))
    throw new UsageError(
      `--variant must be one of ${variantsOfKind('vtpm').join(', ')} (SEV-SNP and TDX have their own verbs)`,
    );
  const nonce = parseHex(values.nonce, '--nonce');
  const at = parseAt(values.at);
  const document = await readInput(values.document, 'document');
  const policy = await loadPolicy(values.config);
  const trustedAk = await loadTrustedAk(values['trusted-ak']);
  const roots = await loadRoots(values['ak-roots'] ?? []);
  const akTrust =
    format === 'json' && variant === 'qemu-vtpm' && trustedAk === undefined
      ? await qemuAkTrust(values)
      : { lookups: {} };

  const base: Pick<VerifyReport, 'format' | 'variant'> = format === 'json' ? { format, variant } : { format };
  try {
    if (format === 'pb') {
      if (!trustedAk && roots.length === 0)
        throw new UsageError('--format pb needs --ak-roots or --trusted-ak');
      const res = await verifyRawAttestation(document, {
        nonce,
        trust: trustedAk ? { trustedAk } : { roots, intermediates: roots, at },
        ...(policy ? { policy } : {}),
      });
      return {
        verdict: 'accepted',
        ...base,
        checks: noteNoConfig(res.checks, !!policy),
        mismatches: mismatchRows(res.warnings),
      };
    }
    const validator = jsonValidator(
      variant,
      policy ?? NO_MEASUREMENTS,
      trustedAk,
      roots,
      at,
      akTrust.lookups,
    );
    const res = await validator.validate(
      document,
      nonce,
      akTrust.peerAddress === undefined ? undefined : { peerAddress: akTrust.peerAddress },
    );
    return {
      verdict: 'accepted',
      ...base,
      checks: noteNoConfig(res.checks, !!policy),
      mismatches: mismatchRows(res.warnings),
      userData: hex(res.userData),
    };
  } catch (err) {
    if (!isAttestationError(err)) throw err;
    if (err.check === 'document-format') throw new UsageError(`document ${values.document}: ${err.message}`);
    return {
      verdict: 'rejected',
      ...base,
      failedCheck: err.check,
      reason: err.message,
      checks: err.checks.length ? err.checks : [{ name: err.check, ok: false, detail: err.message }],
      mismatches: mismatchRows(err.mismatches),
    };
  }
}

/** Renders the report for humans. */
export function renderReport(r: VerifyReport): string {
  const lines = [
    `verdict: ${r.verdict.toUpperCase()} (${r.format}${r.variant ? `, ${r.variant}` : ''})`,
    ...(r.reason ? [`reason: ${r.failedCheck}: ${r.reason}`] : []),
    'checks:',
  ];
  const width = Math.max(...r.checks.map((c) => c.name.length));
  for (const c of r.checks)
    lines.push(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name.padEnd(width)}  ${c.detail ?? ''}`.trimEnd());
  if (r.mismatches.length) {
    lines.push('measurement mismatches:');
    for (const m of r.mismatches) {
      const actual = m.actual === null ? undefined : Buffer.from(m.actual, 'hex');
      lines.push(`  ${formatMismatch({ ...m, expected: Buffer.from(m.expected, 'hex'), actual })}`);
    }
  }
  if (r.userData) lines.push(`userData: ${r.userData}`);
  return `${lines.join('\n')}\n`;
}

/** Runs `confboot attestation verify`; resolves to the exit code. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const args = argv[0] === 'verify' ? argv.slice(1) : argv;
    const values = parseOptions(args, attestationVerifyCommand);
    if (values === undefined) return 0;
    const report = await verifyFromFlags(values);
    return printResult(
      values.output,
      'attestation verify',
      report.verdict === 'accepted' ? 0 : 1,
      report,
      renderReport,
    );
  });
}

/** The command's option table. */
export const commandSpecs = [attestationVerifyCommand];
