/**
 * The steps of `mini upgrade` (src/testbed/mini/upgrade.ts), each on the running cluster and checked
 * from real state: the operator's dry run against the evidence the join service keeps in the cluster
 * and the rollout of a config through ConfigMap join-config (both through host/upgrade-entry.ts in the
 * network namespace), a fresh worker joining with image B, reboots that rejoin or are refused, the
 * per-worker comparison of prediction and outcome, and the receipts checked against the served JWKS.
 *
 * Over 400 lines because it holds every step of one scenario in its order, each with its check;
 * the host programs and the dry run live in their own modules.
 */
import { join } from 'node:path';
import { replayEventLog } from '../../../adapters/attestation/eventlog/tcg-log.js';
import type { DryRunReport } from '../../../app/join-service/dry-run.js';
import { messageOf } from '../../../ports/errors.js';
import type { MiniCluster } from '../context.js';
import type { UpgradeEntryInput, UpgradeEntryOutput } from '../host/upgrade-entry.js';
import { type MiniNodeSpec, NODE_CMDLINE } from '../types.js';
import { bootstrapConfig } from './fleet.js';
import { type MiniSecrets, runHostEntry } from './init.js';
import { fromPeer, joinServiceLines, waitForRefusal, workerStage } from './join.js';
import { decodeLog } from './reference.js';

/** Image B's kernel command line: image A's and one more parameter, so PCR 9 differs. */
export const IMAGE_B_CMDLINE = `${NODE_CMDLINE} confboot.image=b`;
/** The control plane's join service serves /metrics and the JWKS here (guest/agent.ts). */
const JOIN_SERVICE_HTTP_PORT_IN_VM = 9080;

/** Expected PCR values by index. */
export type Pcrs = Map<number, Buffer>;

/** How many join service lines the control plane's current boot has logged. */
export function auditMark(c: MiniCluster): number {
  return joinServiceLines(c).length;
}

/** Seconds since `started`. */
export function secondsSince(started: number): number {
  return Math.round((Date.now() - started) / 1000);
}

/** Waits until node `name`'s bootstrapper exits this boot; throws unless it exited 0. */
export async function waitBootstrapped(c: MiniCluster, name: string): Promise<void> {
  const r = await c.waitReport(c.vm(name), (x) => x.type === 'bootstrapper-exit');
  if (r.type === 'error') throw new Error(`in the VM: ${String(r.message)}`);
  if (r.code !== 0) throw new Error(`its bootstrapper exited ${String(r.code)}`);
}

/** The bootstrapper's last line of node `name`'s current boot. */
export function lastBootstrapperLine(c: MiniCluster, name: string): string | undefined {
  return c
    .reports(name)
    .filter((r) => r.type === 'log' && r.source === 'bootstrapper' && typeof r.line === 'string')
    .map((r) => String(r.line))
    .pop();
}

/** One node's prediction and, once known, its real outcome. */
export interface UpgradePrediction {
  node: string;
  predicted: 'accepted' | 'refused';
  why: string;
  outcome?: 'accepted' | 'refused';
}

/** One step of `mini upgrade` (the shape of `mini lifecycle`'s steps). */
export interface UpgradeStepResult {
  step:
    | 'form'
    | 'image-b'
    | 'dry-run'
    | 'rollout'
    | 'join-b'
    | 'rejoin-a'
    | 'expire-a'
    | 'expired-reboot'
    | 'reboot-b'
    | 'prediction'
    | 'receipts';
  node: string;
  ok: boolean;
  reason: string;
  /** The config the step rolled out or dry-ran (`A`, `B only`, `A+B`, `A expiring+B`). */
  config?: string;
  /** The measurement set a rejoin matched (audit record). */
  measurementSet?: string;
  /** The dry run's per-node predictions. */
  predictions?: UpgradePrediction[];
  /** The refusal's reason code. */
  reasonCode?: string;
  /** The Kubernetes Event the join service recorded for the refusal. */
  event?: string;
  seconds: number;
}

/** The run's state the steps share. */
export interface Run {
  c: MiniCluster;
  kubeconfigPath: string;
  akRegistryPath: string;
  secrets: MiniSecrets;
  /** node name → its evidence record key (disk/<uuid>), from the join service's audit. */
  keys: Map<string, string>;
}

export async function entry(run: Run, input: UpgradeEntryInput, log: string): Promise<UpgradeEntryOutput> {
  return runHostEntry<UpgradeEntryOutput>(run.c, 'host/upgrade-entry', input, log);
}

/** The node a dry-run record is about (its node name, else the node whose disk it names). */
export function nodeOf(run: Run, n: DryRunReport['nodes'][number]): string {
  for (const [name, key] of run.keys) if (key === n.key) return name;
  return n.nodeName ?? n.key;
}

/** Dry-runs `config` against the cluster's evidence; predictions per worker. */
export async function dryRunStep(run: Run, label: string, config: unknown): Promise<UpgradeStepResult> {
  const started = Date.now();
  const out = await entry(
    run,
    {
      action: 'dry-run',
      kubeconfigPath: run.kubeconfigPath,
      attestationConfig: config,
      akRegistryPath: run.akRegistryPath,
    },
    'dry-run.log',
  );
  const predictions = (out.report?.nodes ?? [])
    .filter((n) => n.key.startsWith('disk/'))
    .map((n) => ({ node: nodeOf(run, n), predicted: n.predicted, why: n.why }));
  return {
    step: 'dry-run',
    node: 'operator',
    ok: out.ok,
    config: label,
    reason: out.ok ? `${predictions.length} recorded node(s)` : `dry run failed: ${out.error}`,
    predictions,
    seconds: secondsSince(started),
  };
}

/** Applies `config` and waits until the join service on the control plane loaded it. */
export async function rolloutStep(
  run: Run,
  step: 'rollout' | 'expire-a',
  label: string,
  config: unknown,
): Promise<UpgradeStepResult> {
  const { c } = run;
  const started = Date.now();
  const from = auditMark(c);
  const out = await entry(
    run,
    { action: 'rollout', kubeconfigPath: run.kubeconfigPath, attestationConfig: config },
    'rollout.log',
  );
  if (!out.ok)
    return {
      step,
      node: c.controlPlane.name,
      ok: false,
      config: label,
      reason: `rollout failed: ${out.error}`,
      seconds: secondsSince(started),
    };
  c.progress(`operator         rolled out ${label} (ConfigMap kube-system/join-config)`);
  // The join service dry-runs every config it loads: its report says the new one is in force.
  let loaded: Record<string, unknown> | undefined;
  while (loaded === undefined) {
    loaded = joinServiceLines(c)
      .slice(from)
      .find((l) => /^Loaded attestation config (accepts|would refuse)/.test(String(l.msg)));
    if (loaded !== undefined) break;
    if (c.remaining() <= 1)
      return {
        step,
        node: c.controlPlane.name,
        ok: false,
        config: label,
        reason: 'the join service did not load the new config in time',
        seconds: secondsSince(started),
      };
    c.checkStopped();
    await new Promise((r) => setTimeout(r, 1000));
  }
  return {
    step,
    node: c.controlPlane.name,
    ok: true,
    config: label,
    reason: `the join service loaded it: ${String(loaded.msg)}`,
    seconds: secondsSince(started),
  };
}

/** The audit line of the rejoin issued to `ip` since `from`. */
export function issuedRejoin(run: Run, ip: string, from: number): Record<string, unknown> | undefined {
  return joinServiceLines(run.c)
    .slice(from)
    .find(
      (l) =>
        l.event === 'join-audit' &&
        fromPeer(l, ip) &&
        l.rpc === 'IssueRejoinTicket' &&
        l.outcome === 'issued',
    );
}

/** Reboots worker `name` with `cmdline` and expects a rejoin matching measurement set `set`. */
export async function rejoinStep(
  run: Run,
  step: 'join-b' | 'rejoin-a' | 'reboot-b',
  name: string,
  cmdline: string,
  set: string,
): Promise<UpgradeStepResult> {
  const { c } = run;
  const started = Date.now();
  const ip = c.result(name).ip;
  const from = auditMark(c);
  try {
    c.t0 = Date.now();
    c.progress(`${name.padEnd(16)} reboot into image ${set === 'image-b' ? 'B' : 'A'}`);
    await c.rebootNode(name, { cmdline, config: bootstrapConfig(c, c.node(name), false) });
    await waitBootstrapped(c, name);
  } catch (err) {
    return { step, node: name, ok: false, reason: messageOf(err), seconds: secondsSince(started) };
  }
  const audit = issuedRejoin(run, ip, from);
  const matched = typeof audit?.measurementSet === 'string' ? audit.measurementSet : undefined;
  const ok = audit !== undefined && matched === set;
  c.progress(`${name.padEnd(16)} ${ok ? `rejoined, matching ${set}` : `did NOT rejoin with ${set}`}`);
  return {
    step,
    node: name,
    ok,
    ...(matched === undefined ? {} : { measurementSet: matched }),
    reason: ok
      ? `rejoined; the join service's audit names measurement set ${set}`
      : `audit: ${audit === undefined ? 'no issued rejoin' : `measurement set ${matched}`}; bootstrapper: ${lastBootstrapperLine(c, name) ?? '-'}`,
    seconds: secondsSince(started),
  };
}

/** Reboots worker `name` into image A after `image-a` expired: refused with `measurement-set-expired`. */
export async function expiredRebootStep(run: Run, name: string): Promise<UpgradeStepResult> {
  const { c } = run;
  const started = Date.now();
  const ip = c.result(name).ip;
  const from = auditMark(c);
  let refusal: Record<string, unknown>;
  try {
    c.t0 = Date.now();
    c.progress(`${name.padEnd(16)} reboot into image A (image-a has expired)`);
    await c.rebootNode(name, { cmdline: NODE_CMDLINE, config: bootstrapConfig(c, c.node(name), false) });
    refusal = await waitForRefusal(c, ip, from, () =>
      c.reports(name).some((x) => x.type === 'bootstrapper-exit')
        ? 'its bootstrapper finished: the rejoin was NOT refused'
        : undefined,
    );
  } catch (err) {
    return {
      step: 'expired-reboot',
      node: name,
      ok: false,
      reason: messageOf(err),
      seconds: secondsSince(started),
    };
  }
  const reasonCode = typeof refusal.reasonCode === 'string' ? refusal.reasonCode : String(refusal.reason);
  const issued = joinServiceLines(c)
    .slice(from)
    .some((l) => l.event === 'join-audit' && fromPeer(l, ip) && l.outcome === 'issued');
  const event = await refusalEvent(c, 'MeasurementSetExpired', ip);
  const ok = reasonCode === 'measurement-set-expired' && !issued && event !== undefined;
  c.progress(
    `${name.padEnd(16)} ${ok ? 'refused: measurement-set-expired' : `NOT refused as expired (${reasonCode})`}`,
  );
  return {
    step: 'expired-reboot',
    node: name,
    ok,
    reasonCode,
    ...(event === undefined ? {} : { event }),
    reason: `${String(refusal.rpc)} refused (${reasonCode}): ${String(refusal.detail ?? '')}${issued ? '; SOMETHING WAS ISSUED' : ''}${event === undefined ? '; NO Kubernetes Event recorded it' : ''}`,
    seconds: secondsSince(started),
  };
}

/**
 * The message of the Kubernetes Event with `reason` about caller `ip` that the join service recorded
 * in the SIMULATED API server (the control plane reports the server's Events); waits for it, bounded
 * by the run's deadline; undefined when none came.
 */
async function refusalEvent(c: MiniCluster, reason: string, ip: string): Promise<string | undefined> {
  for (;;) {
    const events = c
      .reports(c.controlPlane.name)
      .filter((r) => r.type === 'api-server' && Array.isArray(r.events))
      .flatMap((r) => r.events as Array<{ reason?: unknown; message?: unknown }>);
    const found = events.find((e) => e.reason === reason && String(e.message).includes(`from ${ip},`));
    if (found !== undefined) return `${reason}: ${String(found.message)}`;
    if (c.remaining() <= 1) return undefined;
    c.checkStopped();
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** Every receipt the join service issued (audit lines), verified against the JWKS it serves. */
export async function receiptsStep(run: Run): Promise<UpgradeStepResult> {
  const { c } = run;
  const started = Date.now();
  const nodeAt = (peer: string) => c.nodes.find((n) => fromPeer({ peer }, c.result(n.name).ip))?.name ?? peer;
  const receipts = joinServiceLines(c)
    .filter((l) => l.event === 'join-audit' && l.outcome === 'issued' && typeof l.receipt === 'string')
    .map((l) => ({ node: nodeAt(String(l.peer)), jwt: String(l.receipt) }));
  const issued = joinServiceLines(c).filter((l) => l.event === 'join-audit' && l.outcome === 'issued').length;
  const cpIp = c.result(c.controlPlane.name).ip;
  const out = await entry(
    run,
    {
      action: 'receipts',
      jwksUrl: `http://${cpIp}:${JOIN_SERVICE_HTTP_PORT_IN_VM}/.well-known/jwks.json`,
      receipts,
    },
    'receipts.log',
  );
  const verified = (out.receipts ?? []).filter((r) => r.ok).length;
  const ok = out.ok && receipts.length === issued && issued > 0 && verified === issued;
  return {
    step: 'receipts',
    node: 'operator',
    ok,
    reason:
      out.error ??
      `${verified} of ${issued} issued ticket(s) carry a receipt that verifies against the JWKS the join service serves${(
        out.receipts ?? []
      )
        .filter((r) => !r.ok)
        .map((r) => `; ${r.node}: ${r.error}`)
        .join('')}`,
    seconds: secondsSince(started),
  };
}

/** The record key of each worker's disk, from the audit of its join. */
export function recordKeys(c: MiniCluster): Map<string, string> {
  const keys = new Map<string, string>();
  for (const n of c.nodes.slice(1)) {
    const join = joinServiceLines(c).find(
      (l) =>
        l.event === 'join-audit' &&
        l.rpc === 'IssueJoinTicket' &&
        l.outcome === 'issued' &&
        fromPeer(l, c.result(n.name).ip),
    );
    if (typeof join?.diskUuid === 'string') keys.set(n.name, `disk/${join.diskUuid.toLowerCase()}`);
  }
  return keys;
}

/** The B worker: not booted with the cluster, it joins after the A+B rollout. */
export const B_NODE: MiniNodeSpec = { name: 'worker-1', role: 'worker', boot: 'good' };

/** Boots the fresh B worker and follows it to its join; the step checks its set and its event log. */
export async function joinBStep(run: Run, b: Pcrs): Promise<UpgradeStepResult> {
  const { c } = run;
  const started = Date.now();
  const from = auditMark(c);
  const slot = c.slots.get(B_NODE.name);
  c.nodes.push(B_NODE);
  c.results.set(B_NODE.name, {
    name: B_NODE.name,
    role: B_NODE.role,
    boot: B_NODE.boot,
    ip: slot?.ip ?? '',
    stage: 'booting',
    accepted: false,
    reason: '',
    mismatches: [],
    consoleLog: join(c.nodeDir(B_NODE.name), 'console.log'),
    seconds: 0,
  });
  c.t0 = Date.now();
  c.say(B_NODE.name, 'booting', `(image B: "${IMAGE_B_CMDLINE}", ${c.accel})`);
  await c.startNode(B_NODE.name, { cmdline: IMAGE_B_CMDLINE, config: bootstrapConfig(c, B_NODE) });
  await workerStage(c, B_NODE);
  const r = c.result(B_NODE.name);
  const audit = joinServiceLines(c)
    .slice(from)
    .find(
      (l) =>
        l.event === 'join-audit' &&
        fromPeer(l, r.ip) &&
        l.rpc === 'IssueJoinTicket' &&
        l.outcome === 'issued',
    );
  const matched = typeof audit?.measurementSet === 'string' ? audit.measurementSet : undefined;
  if (typeof audit?.diskUuid === 'string') run.keys.set(B_NODE.name, `disk/${audit.diskUuid.toLowerCase()}`);
  // Image B's PCRs 4 and 9 as computed equal those its own firmware event log replays to.
  const measured = c.reports(B_NODE.name).find((x) => x.type === 'measured');
  const replayed = measured === undefined ? undefined : replayEventLog(decodeLog(measured.eventLog)).get(11);
  const logAgrees = [4, 9].every(
    (i) => replayed?.get(i) !== undefined && b.get(i)?.equals(Buffer.from(replayed.get(i) as Uint8Array)),
  );
  const ok = r.accepted && matched === 'image-b' && logAgrees;
  return {
    step: 'join-b',
    node: B_NODE.name,
    ok,
    ...(matched === undefined ? {} : { measurementSet: matched }),
    reason: `${r.reason}; audit names measurement set ${matched ?? '-'}; its event log ${logAgrees ? 'replays to' : 'does NOT replay to'} image B's computed PCRs 4 and 9`,
    seconds: secondsSince(started),
  };
}

/** Per worker: the prediction of `final` against the outcome of its last reboot step. */
export function predictionSteps(
  steps: UpgradeStepResult[],
  final: UpgradeStepResult,
  workers: string[],
): UpgradeStepResult[] {
  return workers.map((w) => {
    const p = final.predictions?.find((x) => x.node === w);
    const last = steps
      .filter((x) => x.node === w && (x.step === 'expired-reboot' || x.step === 'reboot-b'))
      .pop();
    // A step that did not hold has no outcome to compare (it may not have booted at all).
    const outcome =
      last === undefined || !last.ok
        ? undefined
        : last.step === 'expired-reboot'
          ? ('refused' as const)
          : ('accepted' as const);
    return {
      step: 'prediction' as const,
      node: w,
      ok: p !== undefined && outcome !== undefined && p.predicted === outcome,
      predictions: p === undefined ? [] : [{ ...p, ...(outcome === undefined ? {} : { outcome }) }],
      reason: `predicted ${p?.predicted ?? '-'} (${p?.why ?? 'no record'}), outcome ${outcome ?? '-'}`,
      seconds: 0,
    };
  });
}
