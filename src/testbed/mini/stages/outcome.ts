/**
 * Stage `outcome`: every VM's end state from real evidence. After the VMs stopped (with `keep` all
 * but the control plane) it reads what each VM reported (the state disk as the node saw it, the
 * bootstrapper's last line, PCR 15 read from its TPM against SHA256(0^32 || SHA256(cluster ID))) and
 * checks each disk image on the host: the initial passphrase no longer opens it, the key derived
 * (HKDF, the key service's derivation) for its UUID does. Then judges the run and builds the result.
 * Before the VMs stop, {@link statusSnapshot} takes `confboot status -o json` of the running cluster.
 */
import { existsSync } from 'node:fs';
import { HkdfKms } from '../../../adapters/kms/hkdf-kms.js';
import { expectedPcr15 } from '../../../adapters/tpm/pcr15-marker.js';
import { STATE_DISK_KEY_LENGTH } from '../../../domain/key-derivation.js';
import { opensWithKey } from '../../demo/state-disk.js';
import type { MiniCluster } from '../context.js';
import type { UpgradeEntryOutput } from '../host/upgrade-entry.js';
import { COMPUTED_PCRS, REFERENCE_PCRS } from '../measurements.js';
import type { MiniNodeResult, MiniResult } from '../types.js';
import { adminKubeconfigPath, type MiniSecrets, runHostEntry } from './init.js';

const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

/** What is SIMULATED in every mini run. */
export const MINI_SIMULATED = [
  'kubeadm (init generates the cluster CA and admin.conf for real; join checks its configuration; no Kubernetes runs)',
  'Kubernetes API server (a strict in-memory REST server on the control plane, port 6443, HTTPS with a serving certificate from the cluster CA, random admin token from the simulated kubeadm init)',
  "kubelet TLS bootstrap (each joining node's simulated kubeadm join sends the kubelet's client CSR with the ticket's bootstrap token and key, waits for it to be approved and signed, writes kubelet.conf and registers its Node; the production confboot node-operator on the control plane approves it)",
  "kube-controller-manager (the control plane's agent signs approved kubelet CSRs with the cluster CA; it auto-approves only while kubeadm's binding exists, which init deletes)",
];

/**
 * `confboot status -o json` of the running cluster, from the operator's side of the bridge through
 * the admin kubeconfig init kept: the envelope it printed, or `{error}` when it could not run.
 */
export async function statusSnapshot(c: MiniCluster): Promise<unknown> {
  const out = await runHostEntry<UpgradeEntryOutput>(
    c,
    'host/upgrade-entry',
    { action: 'status', kubeconfigPath: adminKubeconfigPath(c) },
    'status.log',
  );
  return out.ok && out.status !== undefined ? out.status : { error: out.error ?? 'no status printed' };
}

/** PCR 15 of a report against the cluster's marker. */
export function pcr15Evidence(
  actual: string | null,
  secrets: MiniSecrets,
): NonNullable<MiniNodeResult['pcr15']> {
  const expected = hex(expectedPcr15(secrets.clusterId));
  return { actual, expected, matches: actual === expected, zero: actual === '00'.repeat(32) };
}

/** Whether `key`/the initial passphrase/the derived key opens node `name`'s disk image on the host. */
export async function diskOnHost(
  c: MiniCluster,
  name: string,
  uuid: string,
  secrets: MiniSecrets | undefined,
): Promise<NonNullable<MiniNodeResult['diskOnHost']>> {
  const image = c.diskImage(name);
  const kms = secrets ? new HkdfKms(secrets.masterSecret, secrets.masterSalt) : undefined;
  return {
    opensWithInitialPassphrase: await opensWithKey(image, c.initialPassphrases.get(name) as Buffer),
    opensWithDerivedKey: kms
      ? await opensWithKey(image, await kms.getDataKey(uuid.toLowerCase(), STATE_DISK_KEY_LENGTH))
      : false,
  };
}

/** The state disk as the VM reported it after its bootstrapper (first `disk-state` report), if it did. */
export function diskInVmOf(reports: readonly Record<string, unknown>[]): MiniNodeResult['diskInVm'] {
  const state = reports.find((x) => x.type === 'disk-state');
  if (state === undefined) return undefined;
  return {
    active: state.active === true,
    cipher: (state.cipher as string | null) ?? null,
    integrity: (state.integrity as string | null) ?? null,
    keyslots: (state.keyslots as number[]) ?? [],
    initialPassphraseOpens: state.initialPassphraseOpens === true,
  };
}

/** Fills in each node's end state from its reports and its disk image. */
export async function collectOutcome(c: MiniCluster, secrets: MiniSecrets | undefined): Promise<void> {
  for (const n of c.nodes) await collectNodeOutcome(c, n.name, secrets);
}

/** Fills in node `name`'s end state from its reports and, once its VM stopped, its disk image. */
export async function collectNodeOutcome(
  c: MiniCluster,
  name: string,
  secrets: MiniSecrets | undefined,
): Promise<void> {
  const r = c.result(name);
  const reports = c.reports(name);
  const inVm = diskInVmOf(reports);
  if (inVm) r.diskInVm = inVm;
  const lastLine = reports
    .filter((x) => x.type === 'log' && x.source === 'bootstrapper' && typeof x.line === 'string')
    .map((x) => String(x.line))
    .filter((l) => l.startsWith('Node '))
    .pop();
  if (lastLine) r.bootstrapper = lastLine;
  const pcr = reports.filter((x) => x.type === 'pcr15' && typeof x.value === 'string').pop();
  if (secrets !== undefined) r.pcr15 = pcr15Evidence(pcr ? String(pcr.value) : null, secrets);
  if (existsSync(c.diskImage(name)) && r.disk) r.diskOnHost = await diskOnHost(c, name, r.disk.uuid, secrets);
  r.seconds = Math.round((Date.now() - c.t0) / 1000);
}

/** The simulated API server's last state, as the control plane reported it. */
export function apiServerReport(c: MiniCluster): MiniResult['apiServer'] | undefined {
  const report = c
    .reports(c.controlPlane.name)
    .filter((x) => x.type === 'api-server' && Array.isArray(x.violations))
    .pop();
  if (report === undefined) return undefined;
  return {
    violations: report.violations as string[],
    joiningNodes: (report.joiningNodes as string[]) ?? [],
    diskBindings: (report.diskBindings as unknown[]) ?? [],
    tokens: Number(report.tokens ?? 0),
  };
}

/** Whether node `n` ended as it must: good ones hold the cluster's disk key and marker, tampered ones nothing. */
export function nodeHeld(n: MiniNodeResult, expected: Map<number, Buffer>): boolean {
  if (n.boot === 'good')
    return (
      n.accepted &&
      n.stage !== 'failed' &&
      n.diskInVm?.active === true &&
      n.diskInVm.initialPassphraseOpens === false &&
      n.diskOnHost?.opensWithDerivedKey === true &&
      n.diskOnHost.opensWithInitialPassphrase === false &&
      n.pcr15?.matches === true
    );
  return (
    n.stage === 'refused' &&
    n.refusedBy === 'join-service' &&
    n.mismatches.length > 0 &&
    n.mismatches.every((m) => m.expected === hex(expected.get(m.pcr) ?? Buffer.alloc(0))) &&
    n.diskOnHost?.opensWithInitialPassphrase === true &&
    n.diskOnHost.opensWithDerivedKey === false &&
    n.pcr15?.zero === true
  );
}

/** The run's result (`ok` when init succeeded, every node held and the API server saw no violation). */
export function buildResult(c: MiniCluster, init: MiniResult['init']): MiniResult {
  const m = c.expected;
  const apiServer = apiServerReport(c);
  const nodes = [...c.results.values()];
  const ok =
    init?.ok === true && nodes.every((n) => nodeHeld(n, m.expected)) && apiServer?.violations.length === 0;
  return {
    accel: c.accel,
    image: { key: c.image.key, kernelPackage: c.image.kernelPackage, initrdSha256: c.image.initrdSha256 },
    measurements: {
      computedFromImage: Object.fromEntries(
        COMPUTED_PCRS.map((p) => [String(p), hex(m.computed.get(p) as Buffer)]),
      ),
      fromReferenceBoot: Object.fromEntries(
        REFERENCE_PCRS.map((p) => [String(p), hex(m.reference.get(p) as Buffer)]),
      ),
      referenceSource: m.referenceSource,
    },
    ...(init === undefined ? {} : { init }),
    ...(apiServer === undefined ? {} : { apiServer }),
    nodes,
    netns: c.network.netns,
    workDir: c.workDir,
    durationMs: Date.now() - c.started,
    simulated: MINI_SIMULATED,
    ok,
  };
}
