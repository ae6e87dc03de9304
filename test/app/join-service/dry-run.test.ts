/**
 * Dry run of a new attestation config against recorded joins: real swtpm nodes (a good boot and a
 * tampered one) quote over real attested TLS to the join service with the real qemu-vtpm validator;
 * the evidence record is the real JSON-lines store. The prediction of `confboot measurements
 * dry-run` for a new config, and of the check the service runs when it loads that config, agrees
 * with what the service then really does with each node. Kubernetes is SIMULATED (harness).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { UpdatableValidator } from '../../../src/adapters/attestation/updatable/updatable-validator.js';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { KubeEvidenceStore } from '../../../src/adapters/kubernetes/evidence-store.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { JoinServiceMetrics } from '../../../src/adapters/ops/metrics.js';
import { JsonlEvidenceStore } from '../../../src/adapters/state/jsonl-evidence-store.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { runDryRun } from '../../../src/app/cli/measurements-dry-run.js';
import { type DryRunReport, withDryRunOnLoad } from '../../../src/app/join-service/dry-run.js';
import { validatorBuilder } from '../../../src/app/join-service/production.js';
import { isAttestationError } from '../../../src/ports/errors.js';
import {
  expectedAttestationConfig,
  replayBoot,
  TAMPERED_BOOT,
} from '../../../src/testbed/demo/boot-measurements.js';
import { FakeKubeApi } from '../../adapters/kubernetes/fake-kube-api.js';
import { type SwtpmNode, startSwtpmNode } from '../../attack/support/nodes.js';
import { captureStdio } from '../../support/stdio.js';
import { useTmpDirs } from '../../support/tmp.js';
import { rejectionOf, startHarness, waitFor } from './harness.js';

const stdio = captureStdio();
const tmp = useTmpDirs('confboot-dry-run-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
const clock = new SystemClock();

/** The demo image's expected PCRs, and a config that expects the tampered boot's PCR 12 instead. */
function configs() {
  const a = expectedAttestationConfig();
  const b = structuredClone(a);
  b.measurements['12'] = {
    expected: Buffer.from(replayBoot(TAMPERED_BOOT).get(12) as Uint8Array).toString('hex'),
    warnOnly: false,
  };
  return { a, b };
}

async function node(tampered = false): Promise<SwtpmNode> {
  const n = await startSwtpmNode(tampered ? TAMPERED_BOOT : undefined);
  cleanups.push(() => n.stop());
  return n;
}

describe('dry run against recorded swtpm evidence (simulated Kubernetes)', () => {
  it('predicts per node what the service then does under the new config, in the CLI and on config load', async () => {
    const dir = tmp();
    const { a, b } = configs();
    const configPath = join(dir, 'attestationConfig');
    const newConfigPath = join(dir, 'new.json');
    writeFileSync(configPath, JSON.stringify(a));
    writeFileSync(newConfigPath, JSON.stringify(b));
    const stateDir = join(dir, 'state');
    const store = await JsonlEvidenceStore.open({ dir: stateDir, clock, logger: silentLogger });
    const metrics = new JoinServiceMetrics({ processMetrics: false });
    const reports: DryRunReport[] = [];
    const validator = await UpdatableValidator.start({
      path: configPath,
      build: withDryRunOnLoad(validatorBuilder('qemu-vtpm', {}, clock, silentLogger), {
        store,
        metrics,
        logger: silentLogger,
        onReport: (r) => reports.push(r),
      }),
      logger: silentLogger,
    });
    cleanups.push(() => validator.close());
    const h = await startHarness(tmp(), { validators: [validator], evidence: store, metrics });
    cleanups.push(() => h.stop());

    // Under the current config: the good node joins, the tampered one is refused in the handshake.
    const good = await node();
    const tampered = await node(true);
    const goodRequest = await h.joinRequest('worker-good');
    await h.client(good.issuer).issueJoinTicket(h.endpoint, goodRequest);
    const refused = await rejectionOf(
      h.client(tampered.issuer).issueJoinTicket(h.endpoint, await h.joinRequest('worker-tampered')),
    );
    expect(isAttestationError(refused)).toBe(true);
    await waitFor(async () => (await store.list()).length === 2, 'two evidence records');

    // The record survives a restart: a store opened anew on the directory has both.
    const reopened = await JsonlEvidenceStore.open({ dir: stateDir, clock, logger: silentLogger });
    const records = await reopened.list();
    const goodKey = `disk/${goodRequest.diskUuid.toLowerCase()}`;
    expect(records.map((r) => [r.key, r.nodeName, r.outcome])).toEqual([
      [goodKey, 'worker-good', 'issued'],
      ['address/127.0.0.1', undefined, 'refused'],
    ]);

    // The current config against the record: nobody joined would be refused (exit 0).
    expect(
      await runDryRun(['--config', configPath, '--evidence', stateDir, '--json', '--trust-ak-as-carried']),
    ).toBe(0);
    stdio.clearStdout();
    // The new config: the joined good node would be refused, the tampered one accepted (exit 1).
    expect(
      await runDryRun(['--config', newConfigPath, '--evidence', stateDir, '--json', '--trust-ak-as-carried']),
    ).toBe(1);
    const predicted = (JSON.parse(stdio.stdout()) as { result: DryRunReport }).result;
    const verdict = (key: string) => predicted.nodes.find((n) => n.key === key);
    expect(verdict(goodKey)).toMatchObject({ joined: true, predicted: 'refused' });
    expect(verdict(goodKey)?.why).toMatch(/^measurements: .*PCR12: expected/);
    expect(verdict('address/127.0.0.1')).toMatchObject({ joined: false, predicted: 'accepted' });
    expect(predicted.wouldRefuseJoined).toEqual([goodKey]);
    stdio.clearStdout();
    expect(
      await runDryRun([
        '--config',
        newConfigPath,
        '--evidence',
        join(stateDir, 'evidence.jsonl'),
        '--trust-ak-as-carried',
      ]),
    ).toBe(1);
    expect(stdio.stdout()).toMatch(/worker-good .*new config: REFUSED measurements/);

    // The same records kept in a cluster (EvidenceRecord resources in the FAKE Kubernetes API
    // server) are read through --evidence cluster and predict the same.
    const api = await new FakeKubeApi().start();
    cleanups.push(() => api.close());
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(kubeconfig, api.kubeconfig());
    const inCluster = new KubeEvidenceStore({
      kubeConfig: loadKubeConfig(kubeconfig),
      clock,
      logger: silentLogger,
    });
    for (const r of records) await inCluster.record(r);
    await inCluster.idle();
    stdio.clearStdout();
    expect(
      await runDryRun([
        ...['--config', newConfigPath, '--evidence', 'cluster', '--kubeconfig', kubeconfig],
        ...['--json', '--trust-ak-as-carried'],
      ]),
    ).toBe(1);
    expect((JSON.parse(stdio.stdout()) as { result: DryRunReport }).result.nodes).toEqual(predicted.nodes);
    expect(api.violations).toEqual([]);

    // The service loads the new config: the same check runs, is counted, and names the good node.
    const before = reports.length;
    writeFileSync(configPath, JSON.stringify(b));
    await validator.reload();
    await waitFor(() => reports.length > before, 'the dry run of the loaded config');
    expect(reports.at(-1)?.wouldRefuseJoined).toEqual([goodKey]);
    const text = (await h.http('/metrics')).body;
    expect(text).toContain('confboot_join_config_dry_runs_total{result="would-refuse-joined"} 1');
    expect(text).toContain('confboot_join_config_dry_run_refused_joined_nodes 1');

    // The real outcome under the new config agrees with the prediction for both nodes.
    const goodAgain = await rejectionOf(
      h.client(good.issuer).issueJoinTicket(h.endpoint, await h.joinRequest('worker-good')),
    );
    expect(isAttestationError(goodAgain)).toBe(true);
    await h.client(tampered.issuer).issueJoinTicket(h.endpoint, await h.joinRequest('worker-tampered'));
  }, 120_000);
});

describe('evidence store bounds (real JSON-lines file)', () => {
  const record = (key: string, at = new Date().toISOString()) => ({
    key,
    peer: '10.0.0.1:1',
    variant: 'qemu-vtpm',
    oid: '1.2.3',
    document: new Uint8Array([1, 2, 3]),
    nonce: new Uint8Array(32),
    rpc: key.startsWith('address/') ? 'attested-tls' : 'IssueJoinTicket',
    outcome: key.startsWith('address/') ? ('refused' as const) : ('issued' as const),
    reason: 'ok',
    at,
  });

  it('handshake refusals never push out records of ticket requests; the oldest of each kind goes first', async () => {
    const dir = tmp();
    const store = await JsonlEvidenceStore.open({
      dir,
      clock,
      logger: silentLogger,
      maxRecords: 2,
      maxRefusedRecords: 2,
    });
    await store.record(record('disk/a'));
    await store.record(record('disk/b'));
    for (let i = 0; i < 50; i++) await store.record(record(`address/10.0.0.${i}`));
    await store.record(record('disk/c'));
    const keys = (await store.list()).map((r) => r.key);
    expect(keys).toEqual(['disk/b', 'address/10.0.0.48', 'address/10.0.0.49', 'disk/c']);
    // Compaction kept the file bounded and a new store reads the same records.
    const again = await JsonlEvidenceStore.open({
      dir,
      clock,
      logger: silentLogger,
      maxRecords: 2,
      maxRefusedRecords: 2,
    });
    expect((await again.list()).map((r) => r.key).sort()).toEqual([...keys].sort());
  });

  it('drops records past retention, keeps the node name across a rejoin, and skips a torn last line', async () => {
    const dir = tmp();
    const store = await JsonlEvidenceStore.open({ dir, clock, logger: silentLogger, maxAgeMs: 60_000 });
    await store.record(record('disk/old', new Date(Date.now() - 120_000).toISOString()));
    await store.record({ ...record('disk/n'), nodeName: 'worker-9' });
    await store.record({ ...record('disk/n'), rpc: 'IssueRejoinTicket' });
    expect((await store.list()).map((r) => [r.key, r.nodeName, r.rpc])).toEqual([
      ['disk/n', 'worker-9', 'IssueRejoinTicket'],
    ]);
    const { appendFileSync } = await import('node:fs');
    appendFileSync(JsonlEvidenceStore.pathIn(dir), '{"key":"disk/torn","peer');
    const again = await JsonlEvidenceStore.open({ dir, clock, logger: silentLogger, maxAgeMs: 60_000 });
    expect((await again.list()).map((r) => r.key)).toEqual(['disk/n']);
  });
});
