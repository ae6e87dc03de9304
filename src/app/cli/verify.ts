/**
 * `confboot verify`: checks one running node live. Makes a fresh random nonce, asks the node's
 * verification service for a document bound to it (`GET /?nonce=…`, docs/verification-service.md),
 * and verifies the document with the validator the join service builds for the variant and the
 * attestation config (the same attestation-key rule: qemu-vtpm needs --qemu-ak-registry, the AK
 * registered for the address the answer came from, or the explicit --trust-ak-as-carried), then that
 * it binds the verification service's user data. A document made for another nonce (a replay) fails
 * the nonce check. Prints every check.
 * Exit 0 accepted, 1 refused, 2 usage, 3 could not decide (node unreachable or busy, a cloud lookup
 * down).
 */
import { randomBytes } from 'node:crypto';
import { BAD_ANSWER, HttpAttestationFetcher } from '../../adapters/http/verification-client.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { VERIFY_SERVICE_USER_DATA } from '../../domain/verification-service.js';
import { isAttestationError, isConfbootError, messageOf } from '../../ports/errors.js';
import { joinHostPort, splitHostPort } from '../../ports/peer-address.js';
import type { AttestationCheck } from '../../ports/types.js';
import type { Variant } from '../../ports/variant.js';
import { EXIT, runCommand, UsageError } from '../program/args.js';
import { readInput } from '../program/input-file.js';
import { defineCommand, duration, type OptionValues, parseOptions } from '../program/options.js';
import { type ExitCode, printResult } from '../program/output.js';
import {
  attestationConfigOption,
  OUTPUT_OPTION,
  parseClusterIdHex,
  variantOption,
} from '../program/shared-options.js';
import { variantEntry } from '../registry/index.js';
import { withNodeLockMarked } from '../registry/node-lock-config.js';
import { buildValidator } from '../registry/validators.js';
import { VERIFICATION_SERVICE_PORT } from '../verification-service/serve.js';
import { AK_TRUST_OPTIONS, operatorLookups } from './operator-inputs.js';

/** `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address; the port defaults to the service's. */
export function parseEndpoint(raw: string, flag: string): string {
  const bad = () => new UsageError(`--${flag}: want HOST, HOST:PORT or [IPv6]:PORT, got "${raw}"`);
  const colons = raw.split(':').length - 1;
  let host: string;
  let port: number = VERIFICATION_SERVICE_PORT;
  if (/^\[[^\]]+\]$/.test(raw)) host = raw.slice(1, -1);
  else if (raw.startsWith('[') || colons === 1) {
    const split = splitHostPort(raw);
    if (split === undefined) throw bad();
    ({ host, port } = split);
  } else host = raw;
  if (host === '' || /[\s/[\]]/.test(host)) throw bad();
  return joinHostPort(host, port);
}

/** Options of `confboot verify`. */
export const verifyCommand = defineCommand({
  name: 'verify',
  summary:
    'Check a running node live: ask its verification service for an attestation bound to a fresh nonce and verify it against the attestation config.',
  options: {
    endpoint: {
      type: 'string',
      valueName: 'HOST[:PORT]',
      required: true,
      description: `the node's verification service (default port ${VERIFICATION_SERVICE_PORT})`,
      parse: parseEndpoint,
    },
    variant: variantOption({ required: true, what: 'attestation variant of the node' }),
    'attestation-config': attestationConfigOption({ required: true }),
    ...AK_TRUST_OPTIONS,
    'cluster-id': {
      type: 'string',
      valueName: 'HEX',
      description:
        "vTPM variants: the cluster's ID; the node-lock register (PCR 15) is then expected as a node of that cluster marks it, instead of zero as the config says for a fresh node",
      parse: parseClusterIdHex,
    },
    timeout: {
      type: 'string',
      valueName: 'DURATION',
      default: '30s',
      description: 'bound on asking the node (connect and answer); a bare number counts seconds',
      parse: duration('s', 1),
    },
    output: OUTPUT_OPTION,
  },
  exitCodes: { 0: 'accepted', 1: 'refused', 3: 'could not decide (node unreachable or busy, a lookup down)' },
});

type VerifyValues = OptionValues<typeof verifyCommand.options>;

/** What the command prints. */
export interface LiveVerifyReport {
  verdict: 'accepted' | 'refused' | 'undecided';
  endpoint: string;
  variant: string;
  /** Hex of the nonce this run made. */
  nonce: string;
  /** The address the answer came from. */
  peerAddress?: string;
  /** The measurement set the document matched, when the config names its sets. */
  measurementSet?: string;
  failedCheck?: string;
  reason?: string;
  checks: AttestationCheck[];
}

/** The config with the node-lock register expected as marked with `clusterId` (vTPM variants). */
function withClusterId(variant: Variant, config: Buffer, clusterId: Uint8Array): Buffer {
  const { kind } = variantEntry(variant);
  if (kind !== 'vtpm') throw new UsageError(`--cluster-id is for vTPM variants; ${variant} is ${kind}`);
  try {
    return withNodeLockMarked(variant, config, clusterId);
  } catch (err) {
    throw new UsageError(`reading --attestation-config: ${messageOf(err)}`);
  }
}

async function validatorFor(values: VerifyValues) {
  const variant = values.variant;
  let config = await readInput(values['attestation-config'], '--attestation-config');
  if (values['cluster-id'] !== undefined) config = withClusterId(variant, config, values['cluster-id']);
  const lookups = await operatorLookups(
    variant,
    {
      qemuAkRegistryPath: values['qemu-ak-registry'],
      trustAkAsCarried: Boolean(values['trust-ak-as-carried']),
      azureAkRootsPath: values['azure-ak-roots'],
    },
    'verify',
  );
  try {
    return buildValidator(variant, config, { clock: new SystemClock(), ...lookups });
  } catch (err) {
    throw new UsageError(`reading --attestation-config: ${messageOf(err)}`);
  }
}

/** Verifies the node as the flags say; resolves to the exit code and the report. */
export async function verifyNode(
  values: VerifyValues,
): Promise<{ code: ExitCode; report: LiveVerifyReport }> {
  const validator = await validatorFor(values);
  const nonce = new Uint8Array(randomBytes(32));
  const report: LiveVerifyReport = {
    verdict: 'undecided',
    endpoint: values.endpoint,
    variant: values.variant,
    nonce: Buffer.from(nonce).toString('hex'),
    checks: [],
  };
  const stop = (verdict: 'refused' | 'undecided', check: string, reason: string) => {
    report.checks.push({ name: check, ok: false, detail: reason });
    return {
      code: verdict === 'refused' ? EXIT.failed : EXIT.undecided,
      report: { ...report, verdict, failedCheck: check, reason },
    };
  };
  let fetched: Awaited<ReturnType<HttpAttestationFetcher['fetch']>>;
  try {
    fetched = await new HttpAttestationFetcher().fetch(values.endpoint, nonce, {
      timeoutInMs: values.timeout,
    });
  } catch (err) {
    const refused = isConfbootError(err) && err.reason === BAD_ANSWER;
    return stop(refused ? 'refused' : 'undecided', 'endpoint', messageOf(err));
  }
  report.peerAddress = fetched.peerAddress;
  report.checks.push({
    name: 'endpoint',
    ok: true,
    detail: `${fetched.document.length}-byte document from ${fetched.peerAddress}`,
  });
  let validated: Awaited<ReturnType<typeof validator.validate>>;
  try {
    validated = await validator.validate(fetched.document, nonce, { peerAddress: fetched.peerAddress });
  } catch (err) {
    if (!isAttestationError(err)) return stop('undecided', 'validator', messageOf(err));
    report.checks.push(...err.checks.filter((c) => c.ok));
    return stop('refused', err.check, err.message);
  }
  report.checks.push(...validated.checks);
  if (validated.measurementSet !== undefined) report.measurementSet = validated.measurementSet;
  if (!Buffer.from(validated.userData).equals(Buffer.from(VERIFY_SERVICE_USER_DATA)))
    return stop(
      'refused',
      'user-data',
      'the document does not bind the verification service\'s user data "VerifyService"',
    );
  report.checks.push({ name: 'user-data', ok: true, detail: 'binds "VerifyService"' });
  return { code: EXIT.ok, report: { ...report, verdict: 'accepted' } };
}

/** The report for people. */
export function renderLiveReport(r: LiveVerifyReport): string {
  const lines = [
    `verdict: ${r.verdict.toUpperCase()} (${r.variant} at ${r.endpoint}${r.peerAddress ? `, answered from ${r.peerAddress}` : ''})`,
    `nonce: ${r.nonce}`,
    ...(r.measurementSet ? [`measurement set: ${r.measurementSet}`] : []),
    ...(r.reason ? [`reason: ${r.failedCheck}: ${r.reason}`] : []),
    'checks:',
  ];
  const width = Math.max(...r.checks.map((c) => c.name.length));
  for (const c of r.checks)
    lines.push(`  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name.padEnd(width)}  ${c.detail ?? ''}`.trimEnd());
  return `${lines.join('\n')}\n`;
}

/** Runs `confboot verify`; resolves to the exit code. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const values = parseOptions(argv, verifyCommand);
    if (values === undefined) return 0;
    const { code, report } = await verifyNode(values);
    return printResult(values.output, 'verify', code, report, renderLiveReport);
  });
}

/** The command's option table. */
export const commandSpecs = [verifyCommand];
