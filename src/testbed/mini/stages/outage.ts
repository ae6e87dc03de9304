/**
 * Step `outage` of `mini lifecycle`: every VM is powered off at once and started again (same disks,
 * same TPMs, good kernel command line). No join service answers, so the control plane's disk mapper
 * serves recovery over attested TLS while it keeps retrying rejoin. Share holders (host entries in
 * the namespace, each verifying the control plane's quote and registered AK before it sends) send:
 * one valid share (the node answers `1 of 2`), one share of another cluster, then a second valid
 * share, which recovers it; the answer names the foreign share. The recovered control plane runs its
 * join service again and every worker rejoins through it without further commands: a rejoin ticket
 * (no join ticket) in the join service's audit, the disk opened with the issued key, its marker
 * intact, PCR 15 marked again, and the kubelet restarted (SIMULATED) with the state disk mounted and
 * the kubelet credentials of the first join on it.
 */
import type { MiniCluster } from '../context.js';
import type { RecoverEntryOutput } from '../host/recover-entry.js';
import { type LifecycleStepResult, NODE_CMDLINE } from '../types.js';
import { bootstrapConfig } from './fleet.js';
import { type MiniSecrets, runHostEntry } from './init.js';
import { auditOf, bootEvidence, kubeletRestartOf, secondsSince, waitBootstrapped } from './node-evidence.js';

/** Port of a control plane's recovery endpoint. */
const RECOVERY_PORT = 9999;

/** The share files of the run: K-of-N of this cluster, and one of another cluster. */
export interface LifecycleShares {
  valid: Uint8Array[];
  foreign: Uint8Array;
  foreignClusterId: string;
  total: number;
  threshold: number;
}

type Answer = NonNullable<LifecycleStepResult['recovery']>[number];

/** One holder's `recover --share` against the control plane. */
async function send(c: MiniCluster, holder: string, share: Uint8Array): Promise<Answer> {
  const cp = c.controlPlane.name;
  c.progress(`holder           ${holder}: recover --share → ${c.result(cp).ip}:${RECOVERY_PORT}`);
  const out = await runHostEntry<RecoverEntryOutput>(
    c,
    'host/recover-entry',
    {
      endpoint: `${c.result(cp).ip}:${RECOVERY_PORT}`,
      attestationConfig: c.expected.attestationConfig,
      akRegistryPath: c.identitiesFile,
      share: Buffer.from(share).toString('base64'),
      timeoutMs: c.remaining(),
    },
    'recover.log',
  );
  const answer = out.ok ? (out.message ?? '') : `refused: ${out.error ?? 'no answer'}`;
  c.progress(`holder           ${holder}: ${answer}`);
  return { holder, ok: out.ok, recovered: out.recovered === true, answer };
}

/** Waits until the recovered control plane runs its join service again. */
async function waitForJoinService(c: MiniCluster): Promise<void> {
  const cp = c.controlPlane.name;
  await c.waitReport(c.vm(cp), (x) => x.type === 'started-program' && x.source === 'join-service');
}

/** Runs the outage step; one entry per node. */
export async function outageStep(
  c: MiniCluster,
  secrets: MiniSecrets,
  markers: Map<string, string>,
  shares: LifecycleShares,
): Promise<LifecycleStepResult[]> {
  const started = Date.now();
  c.t0 = Date.now();
  c.progress('outage           powering every VM off at once');
  await c.stopAll();
  c.progress('outage           starting every VM again (same disks, same TPMs)');
  for (const n of c.nodes)
    await c.startNode(n.name, {
      cmdline: NODE_CMDLINE,
      config: { ...bootstrapConfig(c, n, false), stay: true },
    });
  const cp = c.controlPlane.name;
  const recovery: Answer[] = [];
  let error: string | undefined;
  try {
    recovery.push(await send(c, 'holder 1', shares.valid[0] as Uint8Array));
    recovery.push(await send(c, 'holder of another cluster', shares.foreign));
    recovery.push(await send(c, 'holder 2', shares.valid[1] as Uint8Array));
    await waitBootstrapped(c, cp);
    await waitForJoinService(c);
  } catch (err) {
    error = (err as Error).message;
  }
  const [first, foreign, second] = recovery;
  const foreignId = shares.foreignClusterId.slice(0, 8);
  const waited = first?.ok === true && !first.recovered && first.answer.includes(`1 of ${shares.threshold}`);
  const foreignNamed =
    foreign !== undefined &&
    !foreign.recovered &&
    [foreign.answer, second?.answer ?? ''].some((a) => a.includes(foreignId));
  const cpEvidence = bootEvidence(c, cp, secrets);
  const recovered = second?.recovered === true && /^Node was recovered/.test(cpEvidence.bootstrapper ?? '');
  const cpMarker = cpEvidence.marker === markers.get(cp);
  const entries: LifecycleStepResult[] = [
    {
      step: 'outage',
      node: cp,
      ok:
        error === undefined &&
        waited &&
        foreignNamed &&
        recovered &&
        cpMarker &&
        cpEvidence.pcr15 === 'cluster-marker' &&
        cpEvidence.diskOpen === true,
      recovered,
      markerIntact: cpMarker,
      pcr15: cpEvidence.pcr15,
      diskOpen: cpEvidence.diskOpen === true,
      reason:
        error ??
        `waited for recovery (${waited ? 'one share left it waiting' : 'one share did NOT leave it waiting'}; the share of another cluster ${foreignNamed ? 'was named' : 'was NOT named'}; ${recovered ? 'recovered with the second share' : 'NOT recovered'})`,
      recovery,
      ...(cpEvidence.bootstrapper === undefined ? {} : { bootstrapper: cpEvidence.bootstrapper }),
      seconds: secondsSince(started),
    },
  ];
  await Promise.all(
    c.nodes.slice(1).map(async (n) => {
      let werr: string | undefined;
      try {
        if (error === undefined) await waitBootstrapped(c, n.name);
        else werr = 'the control plane was not recovered';
      } catch (err) {
        werr = (err as Error).message;
      }
      const e = bootEvidence(c, n.name, secrets);
      const audit = auditOf(c, c.result(n.name).ip);
      const rejoined =
        /^Node rejoined/.test(e.bootstrapper ?? '') &&
        audit.some((a) => a.rpc === 'IssueRejoinTicket' && a.outcome === 'issued') &&
        !audit.some((a) => a.rpc === 'IssueJoinTicket');
      const markerIntact = e.marker === markers.get(n.name);
      const { kubeletRestart, restarted } = kubeletRestartOf(c, n.name, e.bootstrapper);
      entries.push({
        step: 'outage',
        node: n.name,
        ok:
          werr === undefined &&
          rejoined &&
          markerIntact &&
          restarted &&
          e.pcr15 === 'cluster-marker' &&
          e.diskOpen === true,
        rejoined,
        markerIntact,
        pcr15: e.pcr15,
        diskOpen: e.diskOpen === true,
        reason:
          werr ??
          `rejoined through the recovered control plane without further commands (kubelet restarted ${restarted}): ${e.bootstrapper ?? '-'}`,
        audit,
        kubeletRestart,
        ...(e.bootstrapper === undefined ? {} : { bootstrapper: e.bootstrapper }),
        seconds: secondsSince(started),
      });
    }),
  );
  return entries;
}
