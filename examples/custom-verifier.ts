/**
 * Example: embed only confboot's attestation verifier, with a measurement policy of your own.
 *
 * A service that wants to trust a machine before handing it something (a key, a job) needs the
 * verifier, not the bootstrapper. This program plays both sides on one machine:
 *  1. a "machine" with a TPM (a real swtpm on loopback) that measured its kernel into PCR 4 and
 *     issues a qemu-vtpm attestation document for a nonce, as a node would;
 *  2. a verifier that checks that document with confboot's qemu-vtpm validator and a custom
 *     {@link MeasurementPolicy}: PCR 4 may hold any kernel on an allow-list (e.g. during a
 *     rollout), something the built-in exact-value policy cannot say.
 * It shows an accepted document, the same document refused after the allow-list moved on (with
 * expected vs actual), and a replay under another nonce refused.
 *
 * Run it with `npx vitest run examples` (examples/example.test.ts runs `main`). It needs swtpm and
 * tpm2-tools (scripts/setup.sh installs them). Outside this repository, import the same names from
 * `confboot` and `confboot/ports` instead of the source paths.
 */
import { createHash, randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createQemuVtpmIssuer } from '../src/adapters/attestation/vtpm/issuer.js';
import { startSwtpm } from '../src/adapters/tpm/swtpm.js';
import { Tpm2ToolsTpm } from '../src/adapters/tpm/tpm2-tools-tpm.js';
import { createValidator } from '../src/app/registry/validators.js';
import { isAttestationError, messageOf } from '../src/ports/errors.js';
import { formatMismatch, type MeasurementPolicy } from '../src/ports/measurement-policy.js';
import type { MeasurementMismatch } from '../src/ports/types.js';

/** SHA-256 as a TPM PCR extend computes it: PCR' = SHA256(PCR ‖ SHA256(event)). */
function extend(pcr: Uint8Array, event: string): Uint8Array {
  const digest = createHash('sha256').update(event).digest();
  return new Uint8Array(createHash('sha256').update(pcr).update(digest).digest());
}

/** The PCR 4 value a machine has after measuring `kernel` once from a fresh TPM. */
export function pcr4After(kernel: string): Uint8Array {
  return extend(new Uint8Array(32), kernel);
}

/**
 * A custom policy: each index may hold any of several allowed values. It keeps the port's contract:
 * every mismatch in index order, missing values count, extra values are ignored.
 */
export class AllowListPolicy implements MeasurementPolicy {
  constructor(private readonly allowed: ReadonlyMap<number, readonly Uint8Array[]>) {
    for (const [index, values] of allowed)
      if (values.length === 0)
        throw new Error(`allow-list for PCR ${index} is empty (it would refuse everything)`);
  }

  compare(actual: Map<number, Uint8Array>): MeasurementMismatch[] {
    const mismatches: MeasurementMismatch[] = [];
    for (const index of [...this.allowed.keys()].sort((a, b) => a - b)) {
      const values = this.allowed.get(index) as readonly Uint8Array[];
      const got = actual.get(index);
      const ok = got !== undefined && values.some((v) => Buffer.from(v).equals(Buffer.from(got)));
      if (!ok) mismatches.push({ index, expected: values[0] as Uint8Array, actual: got, warnOnly: false });
    }
    return mismatches;
  }
}

/** What one verification said. */
export type Verdict =
  | { accepted: true; checks: string[] }
  | { accepted: false; check: string; reasons: string[] };

/** Verifies `document` for `nonce` with the qemu-vtpm validator under `policy`. */
export async function verify(
  document: Uint8Array,
  nonce: Uint8Array,
  policy: MeasurementPolicy,
): Promise<Verdict> {
  const validator = createValidator('qemu-vtpm', { policy });
  try {
    const result = await validator.validate(document, nonce);
    return { accepted: true, checks: result.checks.filter((c) => c.ok).map((c) => c.name) };
  } catch (err) {
    if (!isAttestationError(err)) throw err;
    const reasons = err.mismatches.length > 0 ? err.mismatches.map(formatMismatch) : [err.message];
    return { accepted: false, check: err.check, reasons };
  }
}

/** The three verdicts the example prints. */
export interface ExampleResult {
  duringRollout: Verdict;
  afterRollout: Verdict;
  replayed: Verdict;
}

/** Runs the example on a fresh swtpm; `log` receives the human-readable report. */
export async function main(log: (line: string) => void = console.log): Promise<ExampleResult> {
  const swtpm = await startSwtpm();
  try {
    // The machine: measure a kernel into PCR 4, then attest for the verifier's nonce.
    const tpm = new Tpm2ToolsTpm({ tcti: swtpm.tcti });
    await tpm.pcrEvent(4, new TextEncoder().encode('kernel-6.1'));
    const issuer = createQemuVtpmIssuer(tpm);
    const nonce = new Uint8Array(randomBytes(32));
    const userData = new Uint8Array(createHash('sha256').update('the machine TLS key').digest());
    const document = await issuer.issue(userData, nonce);
    log(`Machine issued a ${issuer.variant} document of ${document.length} bytes`);

    const rollout = new AllowListPolicy(new Map([[4, [pcr4After('kernel-6.1'), pcr4After('kernel-6.6')]]]));
    const duringRollout = await verify(document, nonce, rollout);
    log(`During the rollout (6.1 or 6.6 allowed): ${describe(duringRollout)}`);

    const done = new AllowListPolicy(new Map([[4, [pcr4After('kernel-6.6')]]]));
    const afterRollout = await verify(document, nonce, done);
    log(`After the rollout (only 6.6 allowed): ${describe(afterRollout)}`);

    const replayed = await verify(document, new Uint8Array(randomBytes(32)), rollout);
    log(`Replayed under another nonce: ${describe(replayed)}`);
    return { duringRollout, afterRollout, replayed };
  } finally {
    await swtpm.stop();
  }
}

function describe(v: Verdict): string {
  return v.accepted ? `accepted (${v.checks.join(', ')})` : `refused by ${v.check}: ${v.reasons.join('; ')}`;
}

if (process.argv[1] !== undefined && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err: unknown) => {
    console.error(messageOf(err));
    process.exit(1);
  });
}
