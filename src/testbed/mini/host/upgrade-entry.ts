/**
 * Entry point bundled by `mini upgrade` and run inside its network namespace (`ip netns exec`): the
 * operator's side of an upgrade against the control-plane VM, with the admin kubeconfig from init
 * (the SIMULATED Kubernetes API server on the control plane, over HTTPS verified against the
 * cluster CA). One action per run, read as JSON on stdin; the outcome is printed as one JSON line:
 * - `rollout`: applies an attestation config to ConfigMap kube-system/join-config (what the join
 *   service on the control plane mounts and reloads);
 * - `dry-run`: replays every EvidenceRecord the join service keeps in the cluster against a config
 *   (`confboot measurements dry-run --evidence cluster`: the qemu-vtpm validator with the registered
 *   attestation keys);
 * - `receipts`: fetches the join service's JWKS from its operations port and verifies each receipt;
 * - `status`: `confboot status -o json` through the admin kubeconfig (its envelope as `status`).
 * Importing this module runs it.
 */
import { Writable } from 'node:stream';
import { loadKubeConfig } from '../../../adapters/kubernetes/api.js';
import { KubeEvidenceStore } from '../../../adapters/kubernetes/evidence-store.js';
import { rollOutAttestationConfig } from '../../../adapters/kubernetes/join-config.js';
import { silentLogger } from '../../../adapters/log/pino-logger.js';
import { parseJwks } from '../../../adapters/receipts/receipt-key.js';
import { verifyReceipt } from '../../../adapters/receipts/verify-receipt.js';
import { SystemClock } from '../../../adapters/system/system-clock.js';
import { runStatus } from '../../../app/cli/status.js';
import { type DryRunReport, dryRun } from '../../../app/join-service/dry-run.js';
import { validatorBuilder, variantLookups } from '../../../app/join-service/production.js';
import { messageOf } from '../../../ports/errors.js';

/** What `mini upgrade` passes on stdin. */
export type UpgradeEntryInput =
  | { action: 'rollout'; kubeconfigPath: string; attestationConfig: unknown }
  | { action: 'dry-run'; kubeconfigPath: string; attestationConfig: unknown; akRegistryPath: string }
  | { action: 'receipts'; jwksUrl: string; receipts: Array<{ node: string; jwt: string }> }
  | { action: 'status'; kubeconfigPath: string };

/** What it prints. */
export interface UpgradeEntryOutput {
  ok: boolean;
  error?: string;
  report?: DryRunReport;
  receipts?: Array<{ node: string; ok: boolean; subject?: string; measurementSet?: string; error?: string }>;
  /** `status`: the envelope `confboot status -o json` printed. */
  status?: unknown;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function run(input: UpgradeEntryInput): Promise<UpgradeEntryOutput> {
  const clock = new SystemClock();
  if (input.action === 'status') {
    let out = '';
    const sink = new Writable({
      write(chunk, _enc, cb) {
        out += String(chunk);
        cb();
      },
    });
    await runStatus(['--kubeconfig', input.kubeconfigPath, '-o', 'json'], { clock, out: sink });
    return { ok: true, status: JSON.parse(out) };
  }
  if (input.action === 'rollout') {
    await rollOutAttestationConfig(
      loadKubeConfig(input.kubeconfigPath),
      JSON.stringify(input.attestationConfig),
    );
    return { ok: true };
  }
  if (input.action === 'dry-run') {
    const store = new KubeEvidenceStore({
      kubeConfig: loadKubeConfig(input.kubeconfigPath),
      clock,
      logger: silentLogger,
    });
    const records = await store.list();
    const lookups = await variantLookups('qemu-vtpm', { qemuAkRegistryPath: input.akRegistryPath }, clock);
    const validator = validatorBuilder(
      'qemu-vtpm',
      lookups,
      clock,
      silentLogger,
    )(Buffer.from(JSON.stringify(input.attestationConfig)));
    const report = await dryRun(records, (v) => (v === 'qemu-vtpm' ? validator : undefined));
    return { ok: true, report };
  }
  const res = await fetch(input.jwksUrl, { signal: AbortSignal.timeout(30_000) });
  if (!res.ok) return { ok: false, error: `GET ${input.jwksUrl}: HTTP ${res.status}` };
  const jwks = parseJwks(await res.text());
  const receipts: NonNullable<UpgradeEntryOutput['receipts']> = [];
  for (const r of input.receipts) {
    try {
      const { claims } = await verifyReceipt(r.jwt, jwks);
      const about = claims['confboot.receipt'];
      receipts.push({
        node: r.node,
        ok: true,
        subject: String(claims.sub),
        ...(about.measurementSet === undefined ? {} : { measurementSet: String(about.measurementSet) }),
      });
    } catch (err) {
      receipts.push({ node: r.node, ok: false, error: messageOf(err) });
    }
  }
  return { ok: receipts.every((r) => r.ok), receipts };
}

async function main(): Promise<void> {
  const input = JSON.parse(await readStdin()) as UpgradeEntryInput;
  process.stdout.write(`${JSON.stringify(await run(input))}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stdout.write(`${JSON.stringify({ ok: false, error: messageOf(err) })}\n`);
    process.exit(1);
  },
);
