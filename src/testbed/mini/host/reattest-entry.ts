/**
 * Entry point bundled by `mini lifecycle` and run inside its network namespace (`ip netns exec`):
 * the host's side of the `reattest` step (stages/reattest.ts). Input on stdin, one JSON line out.
 *
 * 1. Waits until the node operator on the control plane (production `confboot node-operator`,
 *    re-attesting every 5 s with the cordon opted in) recorded a passing re-attestation of both
 *    workers on their EvidenceRecords (read with the admin kubeconfig through the SIMULATED API server).
 * 2. Orders the tampered worker's agent to extend an enforced PCR through its TPM.
 * 3. Waits for what the operator does about it: the worker's annotation ok=false with a reason from
 *    a round after the order, an Event about it, the Node cordoned; the other worker re-attested ok
 *    in a round that started after the order, and not cordoned; the operator's metrics.
 * 4. Runs `confboot verify`'s production function (verifyNode, a fresh nonce each) against the good
 *    worker, the tampered one and the control plane, with the cluster ID and the AK registry.
 * 5. Replays: a document the good worker answered for one nonce is verified by the same validator
 *    for its own nonce (accepted) and for a fresh one (refused).
 * Importing this module runs it.
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { HttpAttestationFetcher } from '../../../adapters/http/verification-client.js';
import { loadKubeConfig } from '../../../adapters/kubernetes/api.js';
import { KubeReattestationApi } from '../../../adapters/kubernetes/reattestation-api.js';
import { reattestationEventReason } from '../../../adapters/kubernetes/reattestation-events.js';
import { SystemClock } from '../../../adapters/system/system-clock.js';
import { verifyCommand, verifyNode } from '../../../app/cli/verify.js';
import { parseOptions } from '../../../app/program/options.js';
import { variantEntry } from '../../../app/registry/index.js';
import { withNodeLockMarked } from '../../../app/registry/node-lock-config.js';
import { buildValidator } from '../../../app/registry/validators.js';
import { isAttestationError, messageOf } from '../../../ports/errors.js';
import type { ReattestationResult } from '../../../ports/reattestation.js';
import { OPERATOR_METRICS_PORT, ORDERS_PORT, type PcrExtended, VERIFY_PORT } from '../guest/protocol.js';

interface Named {
  name: string;
  ip: string;
}

/** What `mini lifecycle` passes on stdin. */
export interface ReattestEntryInput {
  kubeconfigPath: string;
  controlPlane: Named;
  good: Named;
  tampered: Named;
  pcr: number;
  attestationConfigPath: string;
  akRegistryPath: string;
  clusterId: string;
  /** Bound on the whole step. */
  deadlineMs: number;
}

/** One `confboot verify` run. */
export interface VerifyRun {
  node: string;
  endpoint: string;
  verdict: string;
  nonce: string;
  failedCheck?: string;
  reason?: string;
  measurementSet?: string;
  /** Runs it took: one that could not decide (the node busy with the operator's quote) is run again. */
  attempts: number;
}

/** A node as the operator left it. */
export interface ReattestedNode {
  node: string;
  last?: ReattestationResult;
  cordoned: boolean;
  /** Seconds from the order until the operator recorded this result. */
  secondsAfterOrder?: number;
}

/** What it prints. */
export interface ReattestEntryOutput {
  ok: boolean;
  error?: string;
  /** Both workers re-attested ok before the order. */
  baseline?: ReattestedNode[];
  /**
   * Workers the operator had cordoned before the order (a failed round while they were still
   * joining: their verification service starts once they bootstrapped), uncordoned by the host.
   */
  uncordonedBeforeOrder?: string[];
  extended?: PcrExtended;
  flagged?: ReattestedNode & { event?: { reason: string; message: string; count: number } };
  others?: ReattestedNode[];
  /** The operator's metrics (its re-attestation lines), from --metrics-listen on the control plane. */
  metrics?: string[];
  verify?: VerifyRun[];
  replay?: { acceptedForItsNonce: boolean; refusedForFreshNonce: boolean; check?: string; reason?: string };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** Polls `probe` every 2 s until it returns a value; throws `what` past the deadline. */
async function until<T>(deadline: number, what: string, probe: () => Promise<T | undefined>): Promise<T> {
  for (;;) {
    const v = await probe().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`${what} within the step's deadline`);
    await sleep(2000);
  }
}

async function verifyRun(input: ReattestEntryInput, n: Named): Promise<VerifyRun> {
  const endpoint = `${n.ip}:${VERIFY_PORT}`;
  const values = parseOptions(
    [
      `--endpoint=${endpoint}`,
      '--variant=qemu-vtpm',
      `--attestation-config=${input.attestationConfigPath}`,
      `--qemu-ak-registry=${input.akRegistryPath}`,
      `--cluster-id=${input.clusterId}`,
      '--timeout=180s',
    ],
    verifyCommand,
  );
  if (values === undefined) throw new Error('confboot verify printed its help');
  let attempts = 0;
  let r: Awaited<ReturnType<typeof verifyNode>>['report'];
  do {
    attempts++;
    r = (await verifyNode(values)).report;
  } while (r.verdict === 'undecided' && attempts < 4);
  return {
    attempts,
    node: n.name,
    endpoint,
    verdict: r.verdict,
    nonce: r.nonce,
    ...(r.failedCheck === undefined ? {} : { failedCheck: r.failedCheck }),
    ...(r.reason === undefined ? {} : { reason: r.reason }),
    ...(r.measurementSet === undefined ? {} : { measurementSet: r.measurementSet }),
  };
}

/** A document of `n` for one nonce, validated for that nonce and for a fresh one. */
async function replay(
  input: ReattestEntryInput,
  n: Named,
): Promise<NonNullable<ReattestEntryOutput['replay']>> {
  const clock = new SystemClock();
  const config = withNodeLockMarked(
    'qemu-vtpm',
    await readFile(input.attestationConfigPath),
    Buffer.from(input.clusterId, 'hex'),
  );
  // As confboot verify --cluster-id builds it: the config with the node-lock register marked.
  const lookups = await variantEntry('qemu-vtpm').lookups(
    { qemuAkRegistryPath: input.akRegistryPath },
    clock,
  );
  const validator = buildValidator('qemu-vtpm', config, { clock, ...lookups });
  const nonce = new Uint8Array(randomBytes(32));
  const fetcher = new HttpAttestationFetcher();
  const ask = () => fetcher.fetch(`${n.ip}:${VERIFY_PORT}`, nonce, { timeoutInMs: 180_000 });
  // The node may be busy with the operator's quote (429/503): ask again, a few times.
  const got = await ask()
    .catch(() => sleep(3000).then(ask))
    .catch(() => sleep(3000).then(ask));
  const options = { peerAddress: got.peerAddress };
  const acceptedForItsNonce = await validator.validate(got.document, nonce, options).then(
    () => true,
    () => false,
  );
  try {
    await validator.validate(got.document, new Uint8Array(randomBytes(32)), options);
    return { acceptedForItsNonce, refusedForFreshNonce: false };
  } catch (err) {
    return {
      acceptedForItsNonce,
      refusedForFreshNonce: isAttestationError(err),
      ...(isAttestationError(err) ? { check: err.check } : {}),
      reason: messageOf(err),
    };
  }
}

async function run(input: ReattestEntryInput, out: ReattestEntryOutput): Promise<void> {
  const deadline = Date.now() + input.deadlineMs;
  const kc = loadKubeConfig(input.kubeconfigPath);
  const api = new KubeReattestationApi({ kubeConfig: kc });
  const core = kc.makeApiClient(CoreV1Api);
  const state = async (name: string, since = 0): Promise<ReattestedNode | undefined> => {
    const [targets, records] = await Promise.all([api.list(), api.issuedRecords()]);
    const t = targets.find((x) => x.nodeName === name);
    const last = records.find((r) => r.name === t?.evidenceRecord)?.last;
    if (t === undefined || last === undefined || Date.parse(last.at) < since) return undefined;
    return { node: name, last, cordoned: t.unschedulable };
  };
  out.baseline = await until(deadline, 'no passing re-attestation of both workers', async () => {
    const both = await Promise.all([state(input.good.name), state(input.tampered.name)]);
    return both.every((s) => s?.last?.ok === true) ? (both as ReattestedNode[]) : undefined;
  });
  // `kubectl uncordon`: uncordoning is the cluster operator's decision, never the node operator's.
  out.uncordonedBeforeOrder = out.baseline.filter((s) => s.cordoned).map((s) => s.node);
  for (const name of out.uncordonedBeforeOrder)
    await core.patchNode(
      { name, body: { spec: { unschedulable: false } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  const ordered = Date.now();
  const res = await fetch(`http://${input.tampered.ip}:${ORDERS_PORT}/extend-pcr`, {
    method: 'POST',
    body: JSON.stringify({ pcr: input.pcr, data: randomBytes(32).toString('hex') }),
    signal: AbortSignal.timeout(180_000),
  });
  if (!res.ok)
    throw new Error(`the order to extend PCR ${input.pcr}: HTTP ${res.status} ${await res.text()}`);
  out.extended = (await res.json()) as PcrExtended;
  const after = (s: ReattestedNode) => ({
    ...s,
    secondsAfterOrder: Math.round((Date.parse(s.last?.at ?? '') - ordered) / 100) / 10,
  });
  const flagged = await until(deadline, `no failed re-attestation of ${input.tampered.name}`, async () => {
    const s = await state(input.tampered.name, ordered);
    return s?.last?.ok === false && s.cordoned ? s : undefined;
  });
  const reason = reattestationEventReason(flagged.last?.reason ?? '');
  const events = await until(deadline, `no ${reason} Event about ${input.tampered.name}`, async () => {
    const list = await core.listNamespacedEvent({ namespace: 'kube-system' });
    const e = (list.items ?? []).find(
      (x) => x.reason === reason && x.message?.includes(`node ${input.tampered.name} `),
    );
    return e === undefined
      ? undefined
      : { reason: String(e.reason), message: String(e.message), count: e.count ?? 1 };
  });
  out.flagged = { ...after(flagged), event: events };
  out.others = [
    after(
      await until(deadline, `no re-attestation of ${input.good.name} after the order`, () =>
        state(input.good.name, ordered),
      ),
    ),
  ];
  const metrics = await fetch(`http://${input.controlPlane.ip}:${OPERATOR_METRICS_PORT}/metrics`, {
    signal: AbortSignal.timeout(30_000),
  }).then((r) => r.text());
  out.metrics = metrics.split('\n').filter((l) => l.startsWith('confboot_reattestation_'));
  out.verify = [];
  for (const n of [input.good, input.tampered, input.controlPlane])
    out.verify.push(await verifyRun(input, n));
  out.replay = await replay(input, input.good);
  const [good, bad, cp] = out.verify;
  out.ok =
    out.flagged.last?.reason === 'measurement-mismatch' &&
    out.flagged.cordoned &&
    out.others.every((s) => s.last?.ok === true && !s.cordoned) &&
    out.metrics.some((l) => /^confboot_reattestation_total\{.*result="failed".*\} [1-9]/.test(l)) &&
    out.metrics.some((l) => /^confboot_reattestation_failing_nodes [1-9]/.test(l)) &&
    good?.verdict === 'accepted' &&
    bad?.verdict === 'refused' &&
    new RegExp(`PCR\\s?${input.pcr}:`).test(bad.reason ?? '') &&
    cp?.verdict === 'accepted' &&
    out.replay.acceptedForItsNonce &&
    out.replay.refusedForFreshNonce;
}

async function main(): Promise<void> {
  const input = JSON.parse(await readStdin()) as ReattestEntryInput;
  const out: ReattestEntryOutput = { ok: false };
  try {
    await run(input, out);
  } catch (err) {
    // What was seen before it failed, with why.
    out.ok = false;
    out.error = messageOf(err);
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stdout.write(`${JSON.stringify({ ok: false, error: messageOf(err) })}\n`);
    process.exit(1);
  },
);
