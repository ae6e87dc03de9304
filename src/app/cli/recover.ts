/**
 * `confboot recover`: sends a control plane that waits for recovery after a full outage either the
 * master secret (`--master-secret-file`, upstream's form: kms_uri with key and salt) or one share
 * file (`--share`, k-of-n). The node's attestation is verified against the cluster's measurements
 * over attested TLS before anything is sent. Prints the node's answer, e.g. `1 of 2 received`.
 * A node that answers busy (`resource-exhausted`: its unlock queue or share store is full, as under
 * a flood of other callers; `unavailable`: not listening yet, or checking a split) is sent the same
 * request again, with capped backoff and jitter, for up to `--retry`; a refusal (attestation,
 * a secret or share that does not belong) is final at once.
 */
import { readFile } from 'node:fs/promises';
import { decryptShare, isEncryptedShare } from '../../adapters/crypto/share-encryption.js';
import { GrpcRecoverClient, RECOVERY_PORT } from '../../adapters/grpc/recover.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import type { Clock } from '../../ports/clock.js';
import { isAttestationError, isConfbootError, messageOf } from '../../ports/errors.js';
import { formatMismatch } from '../../ports/measurement-policy.js';
import { joinHostPort, splitHostPort } from '../../ports/peer-address.js';
import type { RecoverRequest } from '../../ports/recovery-endpoint.js';
import { runCommand, UsageError } from '../program/args.js';
import { defineCommand, duration, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { attestationConfigOption, OUTPUT_OPTION } from '../program/shared-options.js';
import {
  AK_TRUST_OPTIONS,
  akTrustSettings,
  allowWeakPolicyOption,
  operatorValidator,
  parseMasterSecretFile,
  secretVariantOption,
  timeoutOption,
} from './operator-inputs.js';

export const recoverCommand = defineCommand({
  name: 'recover',
  summary:
    "Recover a control plane after a full outage: verify the node's attestation, then send the master secret or one share of it.",
  options: {
    endpoint: {
      type: 'string',
      valueName: 'HOST[:PORT]',
      description: `the node's recovery endpoint (default port ${RECOVERY_PORT})`,
      required: true,
    },
    'attestation-config': attestationConfigOption({ required: true }),
    variant: secretVariantOption(),
    ...AK_TRUST_OPTIONS,
    'allow-weak-measurement-policy': allowWeakPolicyOption('the master secret or a share of it'),
    'master-secret-file': {
      type: 'string',
      valueName: 'F',
      secret: 'file',
      description: 'JSON {"key","salt"} (base64): send the whole master secret',
    },
    share: {
      type: 'string',
      valueName: 'F',
      secret: 'file',
      description: 'one recovery share file (from confboot init --recovery-shares)',
    },
    'share-key': {
      type: 'string',
      valueName: 'F',
      secret: 'file',
      description: "the holder's X25519 private key (PEM) when the share file is encrypted",
    },
    timeout: timeoutOption('each call', '60s'),
    retry: {
      type: 'string',
      valueName: 'DURATION',
      default: '120s',
      aliases: ['retry-seconds'],
      description:
        'while the node answers busy (resource-exhausted or unavailable), send again for up to this long, 1 s to 10 s apart (0: once); a bare number counts seconds',
      parse: duration('s'),
    },
    output: OUTPUT_OPTION,
  },
  epilog:
    'Give exactly one of --master-secret-file and --share.\n' +
    "The variant decides how the node's attestation key is trusted, as in the join service: for qemu-vtpm the\n" +
    "key must be the one --qemu-ak-registry registers for the node's address (without a registry recover\n" +
    'refuses to run, exit 2, unless --trust-ak-as-carried accepts any key: INSECURE).\n' +
    'A busy node (resource-exhausted, unavailable) is sent the same request again for up to --retry.',
  exitCodes: {
    0: 'accepted (recovered, or the share was counted: "k of n received")',
    1: 'refused or failed (attestation, wrong secret, a share that does not belong, still busy)',
  },
});

/** First and largest wait between sends to a busy node, ms. */
const RETRY_FIRST_MS = 1_000;
const RETRY_MAX_MS = 10_000;

/** A node's answer that asks the holder to send again later, not a refusal of what was sent. */
function isBusy(err: unknown): boolean {
  return (
    !isAttestationError(err) &&
    isConfbootError(err) &&
    (err.code === 'resource-exhausted' || err.code === 'unavailable')
  );
}

/**
 * Calls `send` until it succeeds, fails with something other than {@link isBusy}, or the next wait
 * would end after `retryMs` from now: waits 1 s, doubling to 10 s, each with full jitter in its upper
 * half, and says so through `progress`.
 */
async function sendWhileBusy<T>(
  send: () => Promise<T>,
  retryMs: number,
  clock: Clock,
  progress: (line: string) => void,
): Promise<T> {
  const until = clock.now().getTime() + retryMs;
  let wait = RETRY_FIRST_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (err) {
      const pause = Math.round(wait / 2 + Math.random() * (wait / 2));
      if (!isBusy(err) || clock.now().getTime() + pause > until) throw err;
      progress(
        `Node busy (${messageOf(err)}); sending again in ${(pause / 1000).toFixed(1)} s (attempt ${attempt + 1})`,
      );
      await clock.sleep(pause);
      wait = Math.min(wait * 2, RETRY_MAX_MS);
    }
  }
}

async function readMasterSecret(path: string): Promise<RecoverRequest> {
  let content: Buffer;
  try {
    content = await readFile(path);
  } catch (err) {
    throw new UsageError(`--master-secret-file: ${(err as NodeJS.ErrnoException).code ?? messageOf(err)}`);
  }
  const { masterSecret, masterSalt } = parseMasterSecretFile(content);
  return { kind: 'master-secret', masterSecret, salt: masterSalt };
}

async function readShare(path: string, keyPath: string | undefined): Promise<RecoverRequest> {
  let file: Uint8Array;
  try {
    file = new Uint8Array(await readFile(path));
  } catch (err) {
    throw new UsageError(`--share: ${messageOf(err)}`);
  }
  if (isEncryptedShare(file)) {
    if (keyPath === undefined)
      throw new UsageError('--share is encrypted: give the holder key with --share-key');
    try {
      file = decryptShare(file, await readFile(keyPath, 'utf8'));
    } catch (err) {
      throw new UsageError(`--share: ${messageOf(err)}`);
    }
  }
  return { kind: 'share', share: file };
}

/** Runs `confboot recover`. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const v = parseOptions(argv, recoverCommand);
    if (v === undefined) return 0;
    const progress = (line: string) => process.stderr.write(`recover: ${line}\n`);
    const endpointArg = v.endpoint;
    const hp = splitHostPort(endpointArg);
    const endpoint = hp ? joinHostPort(hp.host, hp.port) : joinHostPort(endpointArg, RECOVERY_PORT);
    if (!hp && (endpointArg === '' || /[\s/]/.test(endpointArg)))
      throw new UsageError(`--endpoint: expected HOST[:PORT], got ${JSON.stringify(endpointArg)}`);
    const secretFile = v['master-secret-file'];
    const shareFile = v.share;
    if ((secretFile === undefined) === (shareFile === undefined))
      throw new UsageError('give exactly one of --master-secret-file and --share');

    // The secret (or a share of it) goes only to a node whose attestation proves its image.
    const validator = await operatorValidator(
      v.variant,
      v['attestation-config'],
      v['allow-weak-measurement-policy'],
      'recover',
      akTrustSettings(v),
    );
    const request =
      secretFile !== undefined
        ? await readMasterSecret(secretFile)
        : await readShare(shareFile ?? '', v['share-key']);

    const clock = new SystemClock();
    const client = new GrpcRecoverClient({ validators: [validator], clock });
    progress(`Connecting to ${endpoint} and verifying the node's attestation`);
    try {
      const { status } = await sendWhileBusy(
        () => client.recover(endpoint, request, { timeoutInMs: v.timeout }),
        v.retry,
        clock,
        progress,
      );
      progress('Node attested');
      return printResult(
        v.output,
        'recover',
        0,
        { endpoint, ...status },
        (r) => `${r.recovered ? 'Recovered' : 'Waiting'}: ${r.message}`,
      );
    } catch (err) {
      const mismatches = isAttestationError(err) ? err.mismatches.map(formatMismatch) : [];
      if (v.output === 'json')
        return printResult(
          v.output,
          'recover',
          1,
          { endpoint, refused: messageOf(err), mismatches },
          () => '',
        );
      process.stderr.write(`recover: refused: ${messageOf(err)}\n`);
      for (const m of mismatches) process.stderr.write(`recover:   ${m}\n`);
      return 1;
    } finally {
      if (request.kind === 'master-secret') request.masterSecret.fill(0);
      else request.share.fill(0);
    }
  });
}

/** The command's option table. */
export const commandSpecs = [recoverCommand];
