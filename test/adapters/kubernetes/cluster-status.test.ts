/**
 * KubeClusterSnapshot against the SIMULATED Kubernetes API server (plain HTTP on loopback; the
 * HTTPS path is covered by test/app/cli/status.test.ts): an empty cluster reads as empty, Events
 * are read back to the caller and node their message names, failures reject.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import { KubeClusterSnapshot, refusalOfEvent } from '../../../src/adapters/kubernetes/cluster-status.js';
import { eventMessage } from '../../../src/adapters/kubernetes/event-recorder.js';
import { FakeKubeApi } from '../../../src/testbed/simulated/simulated-kube-api.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-cluster-status-');
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function source() {
  const api = await new FakeKubeApi().start();
  cleanups.push(() => api.close());
  const path = join(tmp(), 'kubeconfig');
  writeFileSync(path, api.kubeconfig());
  const snapshot = new KubeClusterSnapshot({
    kubeConfig: loadKubeConfig(path),
    clock: new FakeClock(),
    logger: new FakeLogger(),
    requestTimeoutInMs: 2000,
  });
  return { api, snapshot };
}

describe('refusalOfEvent', () => {
  it.each([
    [
      'a join naming its node and disk',
      { peer: '10.0.0.3:4321', nodeName: 'w-1', diskUuid: 'abc', attested: true },
      { host: '10.0.0.3', nodeName: 'w-1' },
    ],
    [
      'a rejoin naming no node',
      { peer: '10.0.0.4:1', attested: true },
      { host: '10.0.0.4', nodeName: undefined },
    ],
    [
      'an IPv6 caller refused during attested TLS',
      { peer: '[fd00::5]:1', attested: false, detail: 'node x, (from y)' },
      { host: 'fd00::5', nodeName: undefined },
    ],
  ])('reads back %s from the message the event recorder writes', (_name, fields, want) => {
    const message = eventMessage({
      rpc: 'IssueJoinTicket',
      variant: 'qemu-vtpm',
      reason: 'measurements',
      ...fields,
    });
    expect(refusalOfEvent(message)).toEqual(want);
  });

  it('names nothing in a message of another shape', () => {
    expect(refusalOfEvent('Started container join-service')).toEqual({
      host: undefined,
      nodeName: undefined,
    });
  });
});

describe('KubeClusterSnapshot', () => {
  it('reads an empty cluster (no NodeVersion, no join-config) as empty, with no violation', async () => {
    const { api, snapshot } = await source();
    expect(await snapshot.read()).toEqual({
      nodes: [],
      nodeVersion: undefined,
      evidence: [],
      diskBindings: [],
      refusals: [],
      joinServicePods: [],
      attestationConfig: undefined,
    });
    expect(api.violations).toEqual([]);
  });

  it('keeps only the join service’s Events and reads their time and count', async () => {
    const { api, snapshot } = await source();
    const event = (name: string, component: string, message: string) =>
      api.events.set(name, {
        metadata: { name, namespace: 'kube-system' },
        reason: 'MeasurementMismatch',
        message,
        count: 4,
        lastTimestamp: '2026-11-21T12:00:00Z',
        source: { component },
        reportingComponent: component,
      });
    event(
      'a',
      'confboot-join-service',
      'IssueJoinTicket refused (from 10.0.0.3, node w-1, variant qemu-vtpm): x',
    );
    event('b', 'kubelet', 'IssueJoinTicket refused (from 10.0.0.9, node w-9, variant qemu-vtpm): forged');
    expect((await snapshot.read()).refusals).toEqual([
      {
        reason: 'MeasurementMismatch',
        host: '10.0.0.3',
        nodeName: 'w-1',
        at: '2026-11-21T12:00:00.000Z',
        count: 4,
      },
    ]);
  });

  it('rejects when the API server fails a request', async () => {
    const { api, snapshot } = await source();
    api.failNext.push({ status: 500, method: 'GET' });
    await expect(snapshot.read()).rejects.toMatchObject({ code: 'unavailable' });
  });
});
