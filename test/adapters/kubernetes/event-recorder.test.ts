/**
 * KubeEventRecorder through the real @kubernetes/client-node against the FAKE Kubernetes API server
 * (src/testbed/simulated/simulated-kube-api.ts: the real REST paths of core/v1 Events, every request
 * checked), under fake time: one Event per caller and reason, counts patched at most once per patch
 * interval, a flood costs a bounded number of writes, failures never reach the caller.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../../src/adapters/kubernetes/api.js';
import {
  eventReason,
  KubeEventRecorder,
  type KubeEventRecorderOptions,
} from '../../../src/adapters/kubernetes/event-recorder.js';
import type { RefusalEvent } from '../../../src/ports/event-recorder.js';
import { FakeClock } from '../../fakes/fake-clock.js';
import { FakeLogger } from '../../fakes/fake-logger.js';
import { useTmpDirs } from '../../support/tmp.js';
import { FakeKubeApi } from './fake-kube-api.js';

const tmp = useTmpDirs('confboot-events-');
const apis: FakeKubeApi[] = [];
afterEach(async () => {
  for (const api of apis.splice(0)) {
    expect(api.violations, 'requests the fake API server refused').toEqual([]);
    await api.close();
  }
});

async function recorder(options: Partial<KubeEventRecorderOptions> = {}) {
  const api = await new FakeKubeApi().start();
  apis.push(api);
  const path = join(tmp(), 'kubeconfig');
  writeFileSync(path, api.kubeconfig());
  const clock = new FakeClock();
  const logger = new FakeLogger();
  const r = new KubeEventRecorder({
    kubeConfig: loadKubeConfig(path),
    clock,
    logger,
    instance: 'join-service-abc12',
    ...options,
  });
  const writes = () => api.requests.map((q) => `${q.method} ${q.path.replace(/events\/.*/, 'events/NAME')}`);
  return { api, r, clock, logger, writes };
}

const expired: RefusalEvent = {
  rpc: 'IssueRejoinTicket',
  peer: '10.42.0.7:41234',
  nodeName: 'worker-a1',
  diskUuid: '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0',
  variant: 'qemu-vtpm',
  reasonCode: 'measurement-set-expired',
  reason: 'measurement-set-expired',
  detail: 'it matches only measurement sets that are not valid now (expired or not yet valid): image-a',
  attested: true,
};

describe('KubeEventRecorder against a fake Kubernetes API server', () => {
  it('records a refusal as a Warning Event on the join service DaemonSet, reason in UpperCamelCase', async () => {
    const { api, r, writes } = await recorder();
    r.refused(expired);
    await r.idle();
    expect(writes()).toEqual(['POST /api/v1/namespaces/kube-system/events']);
    const [event] = [...api.events.values()];
    expect(event).toMatchObject({
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { namespace: 'kube-system' },
      involvedObject: {
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        namespace: 'kube-system',
        name: 'join-service',
      },
      reason: 'MeasurementSetExpired',
      type: 'Warning',
      count: 1,
      source: { component: 'confboot-join-service', host: 'join-service-abc12' },
      reportingComponent: 'confboot-join-service',
      reportingInstance: 'join-service-abc12',
    });
    expect(event?.metadata.name).toMatch(/^join-service\.[0-9a-f]{16}$/);
    expect(event?.message).toBe(
      'IssueRejoinTicket refused (from 10.42.0.7, node worker-a1, disk 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0, variant qemu-vtpm): measurement-set-expired: it matches only measurement sets that are not valid now (expired or not yet valid): image-a',
    );
  });

  it('deduplicates: repeats from one caller are one Event whose count is patched at most once per interval', async () => {
    const { api, r, clock, writes } = await recorder({ patchIntervalMs: 60_000 });
    for (let i = 0; i < 5; i++) r.refused(expired);
    await r.idle();
    for (let i = 0; i < 4; i++) r.refused(expired);
    await r.idle();
    // Within the patch interval: counted, not written.
    expect(writes()).toEqual(['POST /api/v1/namespaces/kube-system/events']);
    await clock.advance(60_000);
    r.refused(expired);
    await r.idle();
    expect(writes()).toEqual([
      'POST /api/v1/namespaces/kube-system/events',
      'PATCH /api/v1/namespaces/kube-system/events/NAME',
    ]);
    expect(api.requests[1]?.contentType).toBe('application/merge-patch+json');
    expect(api.events.size).toBe(1);
    expect([...api.events.values()][0]).toMatchObject({ count: 10, lastTimestamp: '2026-11-21T12:01:00Z' });
  });

  it('another caller or another reason is another Event; a repeat after the dedupe window starts a new one', async () => {
    const { api, r, clock } = await recorder({ dedupeWindowMs: 600_000 });
    r.refused(expired);
    r.refused({ ...expired, nodeName: 'worker-a2' });
    r.refused({ ...expired, reasonCode: 'measurement-mismatch', reason: 'measurements' });
    await r.idle();
    expect([...api.events.values()].map((e) => e.reason).sort()).toEqual([
      'MeasurementMismatch',
      'MeasurementSetExpired',
      'MeasurementSetExpired',
    ]);
    await clock.advance(600_001);
    r.refused(expired);
    await r.idle();
    expect(api.events.size).toBe(4);
  });

  it('a flood of refusals from many addresses costs at most the burst of writes; the rest is counted as dropped and logged once', async () => {
    const { api, r, logger } = await recorder({ burst: 5, writesPerSecond: 0.2, maxInFlight: 100 });
    for (let i = 0; i < 1000; i++)
      r.refused({
        rpc: 'attested-tls',
        peer: `10.9.${i >> 8}.${i & 255}:5000`,
        variant: 'unknown',
        reason: 'signature',
        attested: false,
      });
    await r.idle();
    expect(api.events.size).toBe(5);
    expect(r.dropped).toBe(995);
    expect(
      logger.events.filter((e) => e.msg === 'Refusal events dropped by the event rate limit'),
    ).toHaveLength(1);
  });

  it('a flood of unattested refusals has its own budget: the Event of an attested node’s refusal is still written', async () => {
    const { api, r } = await recorder({ burst: 5, writesPerSecond: 0.2, maxInFlight: 2 });
    for (let i = 0; i < 1000; i++)
      r.refused({
        rpc: 'attested-tls',
        peer: `10.9.${i >> 8}.${i & 255}:5000`,
        variant: 'unknown',
        reason: 'signature',
        attested: false,
      });
    r.refused(expired);
    await r.idle();
    const reasons = [...api.events.values()].map((e) => e.reason);
    expect(reasons.filter((x) => x === 'Signature')).toHaveLength(2);
    expect(reasons.filter((x) => x === 'MeasurementSetExpired')).toHaveLength(1);
  });

  it('text from the caller reaches the Event without control characters; an unverified document’s detail is quoted as its claim', async () => {
    const { api, r } = await recorder();
    // Terminal escapes (OSC 8 hyperlink, SGR colour, C1 CSI clear-screen) and a forged second line.
    const forged =
      'certificate "\u001b]8;;https://evil.example\u0007AMD ARK\u001b]8;;\u0007\u001b[32m" is not signed\n' +
      'IssueJoinTicket issued (from 10.0.0.1): ok\u009b2J\u202e';
    r.refused({
      rpc: 'attested-tls',
      peer: '10.9.0.1:5000',
      variant: 'unknown',
      reason: 'certificate-chain',
      detail: forged,
      attested: false,
    });
    r.refused({ ...expired, nodeName: 'worker-\u001b[2Ja1', detail: 'refused\u0085 again\u0007' });
    await r.idle();
    const messages = [...api.events.values()].map((e) => e.message as string);
    const control = (c: string) => {
      const n = c.codePointAt(0) as number;
      return n < 0x20 || (n >= 0x7f && n <= 0x9f) || (n >= 0x202a && n <= 0x202e);
    };
    for (const m of messages) expect([...m].filter(control)).toEqual([]);
    expect(messages).toEqual([
      'attested-tls refused (from 10.9.0.1, variant unknown): certificate-chain: unverified document: "certificate \\"]8;;https://evil.exampleAMD ARK]8;;[32m\\" is not signed' +
        'IssueJoinTicket issued (from 10.0.0.1): ok2J"',
      'IssueRejoinTicket refused (from 10.42.0.7, node worker-[2Ja1, disk 0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0, variant qemu-vtpm): measurement-set-expired: refused again',
    ]);
  });

  it('the correlation cache is bounded: the least recently refused caller is forgotten first', async () => {
    const { api, r } = await recorder({ maxCallers: 2 });
    r.refused({ ...expired, nodeName: 'n1' });
    r.refused({ ...expired, nodeName: 'n2' });
    await r.idle();
    r.refused({ ...expired, nodeName: 'n3' });
    await r.idle();
    // n1 was forgotten: its next refusal is a new Event; n3 is still known.
    r.refused({ ...expired, nodeName: 'n1' });
    r.refused({ ...expired, nodeName: 'n3' });
    await r.idle();
    expect(api.events.size).toBe(4);
  });

  it('an API server that fails or is gone never reaches the caller: the write is dropped and logged', async () => {
    const { api, r, logger } = await recorder();
    api.failNext.push({ method: 'POST', status: 503 });
    expect(() => r.refused(expired)).not.toThrow();
    await r.idle();
    expect(r.dropped).toBe(1);
    expect(logger.events.some((e) => e.msg === 'Recording refusal event failed')).toBe(true);
    // The series was never created, so the next refusal creates it.
    r.refused(expired);
    await r.idle();
    expect(api.events.size).toBe(1);
    await api.close();
    expect(() => r.refused({ ...expired, nodeName: 'other' })).not.toThrow();
    await r.idle();
    expect(r.dropped).toBe(2);
  });

  it.each([
    [{ reasonCode: 'tcb-out-of-date', reason: 'tcb' }, 'TcbOutOfDate'],
    [{ reason: 'disk-bound' }, 'DiskBound'],
    [{ reason: 'rate-limited' }, 'RateLimited'],
    [{ reason: '' }, 'Refused'],
  ])('event reason of %j is %s', (event, want) => {
    expect(eventReason(event)).toBe(want);
  });
});
