/**
 * Entry point bundled by mini and run inside its network namespace: one share holder's
 * `confboot recover --share` against a control plane that waits for recovery. It verifies the
 * node's real qemu-vtpm quote (the cluster's expected measurements and, by the rule of `confboot
 * recover --qemu-ak-registry` and the join service, the AK the host registered for the VM's address
 * in the identities file) over attested TLS before the share is sent, retrying while the recovery
 * endpoint does not listen yet. Reads its input as JSON on stdin (it holds the share), prints the
 * node's answer as JSON on stdout (no secrets). Importing this module runs it.
 */
import { GrpcRecoverClient } from '../../../adapters/grpc/recover.js';
import { SystemClock } from '../../../adapters/system/system-clock.js';
import { checkMeasurementPolicy } from '../../../app/registry/policy-guard.js';
import { qemuAkLookups } from '../../../app/registry/validator-deps.js';
import { buildValidator } from '../../../app/registry/validators.js';
import { isAttestationError, messageOf } from '../../../ports/errors.js';

/** What mini passes on stdin. */
export interface RecoverEntryInput {
  endpoint: string;
  attestationConfig: unknown;
  /**
   * The registered attestation keys (the metadata server's identities file, `--qemu-ak-registry`):
   * the node is trusted only with the AK registered for the address the share goes to.
   */
  akRegistryPath: string;
  /** The share file's bytes, base64. */
  share: string;
  timeoutMs: number;
}

/** What it prints. */
export interface RecoverEntryOutput {
  ok: boolean;
  recovered?: boolean;
  received?: number;
  threshold?: number;
  message?: string;
  error?: string;
  attempts: number;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

const b64 = (s: string) => new Uint8Array(Buffer.from(s, 'base64'));

async function main(): Promise<RecoverEntryOutput> {
  const input = JSON.parse(await readStdin()) as RecoverEntryInput;
  const config = JSON.stringify(input.attestationConfig);
  checkMeasurementPolicy('qemu-vtpm', config, false);
  const validator = buildValidator('qemu-vtpm', Buffer.from(config), {
    clock: new SystemClock(),
    ...(await qemuAkLookups({ qemuAkRegistryPath: input.akRegistryPath })),
  });
  // A TCG guest on a loaded host quotes slowly: seconds to minutes per handshake.
  const client = new GrpcRecoverClient({
    validators: [validator],
    clock: new SystemClock(),
    handshakeTimeoutMs: 120_000,
  });
  const deadline = Date.now() + input.timeoutMs;
  for (let attempts = 1; ; attempts++) {
    try {
      const { status } = await client.recover(
        input.endpoint,
        { kind: 'share', share: b64(input.share) },
        { timeoutInMs: Math.max(1000, Math.min(120_000, deadline - Date.now())) },
      );
      return {
        ok: true,
        recovered: status.recovered,
        received: status.received,
        threshold: status.threshold,
        message: status.message,
        attempts,
      };
    } catch (err) {
      const error = isAttestationError(err) ? `attestation refused: ${messageOf(err)}` : messageOf(err);
      // The endpoint may not listen yet (the node is still booting or rejoining).
      const notYet =
        !isAttestationError(err) &&
        /unavailable|ECONNREFUSED|No connection|EHOSTUNREACH|deadline/i.test(error);
      if (notYet && Date.now() + 5000 < deadline) {
        await new Promise((r) => setTimeout(r, 3000));
        continue;
      }
      return { ok: false, error, attempts };
    }
  }
}

main().then(
  (out) => {
    process.stdout.write(`${JSON.stringify(out)}\n`);
    process.exit(0);
  },
  (err: unknown) => {
    process.stdout.write(`${JSON.stringify({ ok: false, error: messageOf(err), attempts: 0 })}\n`);
    process.exit(1);
  },
);
