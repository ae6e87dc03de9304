/**
 * Re-attestation Events against the SIMULATED API server (a stand-in for kube-apiserver, which cannot
 * run here) over real HTTPS with the bring-up's RBAC, written as the node operator's ServiceAccount.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import {
  KubeReattestationEvents,
  REATTESTATION_EVENT_COMPONENT,
  reattestationEventMessage,
  reattestationEventReason,
} from '../../../src/adapters/kubernetes/reattestation-events.js';
import { silentLogger } from '../../../src/adapters/log/pino-logger.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { REATTESTATION_FAILURES, type ReattestationResult } from '../../../src/ports/reattestation.js';
import { kubeletCluster } from '../../support/kubelet-cluster.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-reattest-events-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

const target = { nodeName: 'w-1', address: '10.0.0.3', evidenceRecord: 'disk-1', unschedulable: false };
const failed: ReattestationResult = {
  at: '2026-11-04T00:00:00.000Z',
  ok: false,
  reason: 'measurement-mismatch',
  detail: 'measurements: PCR 9 differs',
};

describe('reattestation Event text', () => {
  it('every reason code is an UpperCamelCase Event reason after "Reattestation"', () => {
    for (const r of REATTESTATION_FAILURES)
      expect(reattestationEventReason(r)).toMatch(/^Reattestation[A-Z][A-Za-z]+$/);
    expect(reattestationEventReason('no-address')).toBe('ReattestationNoAddress');
  });

  it('strips control characters from what the node or verifier wrote', () => {
    const message = reattestationEventMessage(target, {
      ...failed,
      detail: 'bad \u001b[31mred\u001b[0m\nline',
    });
    expect(message).toBe(
      're-attestation of node w-1 at 10.0.0.3 failed: measurement-mismatch: bad [31mred[0mline',
    );
  });
});

describe('KubeReattestationEvents (SIMULATED API server, node-operator ServiceAccount)', () => {
  it('raises one Event per node and reason with the reason code, and counts repeats on it', async () => {
    const c = await kubeletCluster(tmp());
    closers.push(c.close);
    const kubeConfig = loadKubeConfig(await c.serviceAccountConf('node-operator'));
    const events = new KubeReattestationEvents({
      kubeConfig,
      clock: new SystemClock(),
      logger: silentLogger,
    });
    events.failed(target, failed);
    await events.idle();
    events.failed(target, { ...failed, at: '2026-11-04T00:05:00.000Z' });
    events.failed(
      { ...target, nodeName: 'w-2' },
      { ...failed, reason: 'unreachable', detail: 'connection refused' },
    );
    await events.idle();
    const written = [...c.api.events.values()].sort((a, b) => a.reason.localeCompare(b.reason));
    expect(written).toHaveLength(2);
    expect(written[0]).toMatchObject({
      reason: 'ReattestationMeasurementMismatch',
      type: 'Warning',
      count: 2,
      involvedObject: { kind: 'Deployment', name: 'node-operator', namespace: 'kube-system' },
      source: { component: REATTESTATION_EVENT_COMPONENT },
      message:
        're-attestation of node w-1 at 10.0.0.3 failed: measurement-mismatch: measurements: PCR 9 differs',
    });
    expect(written[1]).toMatchObject({ reason: 'ReattestationUnreachable', count: 1 });
    expect(events.dropped).toBe(0);
    expect(c.api.forbidden).toEqual([]);
    expect(c.api.violations).toEqual([]);
  });

  it('drops what does not fit its queue and counts it', async () => {
    const c = await kubeletCluster(tmp());
    closers.push(c.close);
    const kubeConfig = loadKubeConfig(await c.serviceAccountConf('node-operator'));
    const events = new KubeReattestationEvents({
      kubeConfig,
      clock: new SystemClock(),
      logger: silentLogger,
      maxInFlight: 1,
      maxQueued: 2,
    });
    for (let i = 0; i < 6; i++) events.failed({ ...target, nodeName: `w-${i}` }, failed);
    await events.idle();
    // One written at once, two waiting, three dropped.
    expect(c.api.events.size).toBe(3);
    expect(events.dropped).toBe(3);
  });
});
