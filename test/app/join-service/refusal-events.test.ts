/** Refused audit events become refusal events; nothing else does, and every line still reaches the log. */
import { describe, expect, it } from 'vitest';
import { AUDIT_EVENT, emitAudit } from '../../../src/app/join-service/audit.js';
import { withRefusalEvents } from '../../../src/app/join-service/refusal-events.js';
import type { RefusalEvent } from '../../../src/ports/event-recorder.js';
import { FakeLogger } from '../../fakes/fake-logger.js';

function setup() {
  const base = new FakeLogger();
  const seen: RefusalEvent[] = [];
  const logger = withRefusalEvents(base, { refused: (e) => seen.push(e) });
  return { base, seen, logger };
}

describe('withRefusalEvents', () => {
  it('hands each refused audit event to the recorder with its caller, node, disk and reason code', () => {
    const { base, seen, logger } = setup();
    emitAudit(logger.child({ component: 'join-service' }), {
      event: AUDIT_EVENT,
      rpc: 'IssueRejoinTicket',
      peer: '10.42.0.7:41234',
      variant: 'qemu-vtpm',
      nodeName: 'worker-a1',
      diskUuid: 'd1',
      outcome: 'refused',
      code: 'permission-denied',
      reason: 'measurement-set-expired',
      reasonCode: 'measurement-set-expired',
      detail: 'no measurement set is valid now',
      durationMs: 3,
    });
    expect(seen).toEqual([
      {
        rpc: 'IssueRejoinTicket',
        peer: '10.42.0.7:41234',
        variant: 'qemu-vtpm',
        nodeName: 'worker-a1',
        diskUuid: 'd1',
        reason: 'measurement-set-expired',
        reasonCode: 'measurement-set-expired',
        detail: 'no measurement set is valid now',
        attested: true,
      },
    ]);
    expect(base.events.map((e) => [e.level, e.msg, e.fields.component])).toEqual([
      ['warn', 'Join audit', 'join-service'],
    ]);
  });

  it('a refusal during attested TLS is reported as unattested: the caller proved nothing', () => {
    const { seen, logger } = setup();
    emitAudit(logger, {
      event: AUDIT_EVENT,
      rpc: 'attested-tls',
      peer: '10.9.0.1:5000',
      variant: 'unknown',
      outcome: 'refused',
      code: 'permission-denied',
      reason: 'certificate-chain',
      detail: 'certificate "CN=AMD ARK" is not signed',
      durationMs: 0,
    });
    expect(seen).toEqual([expect.objectContaining({ rpc: 'attested-tls', attested: false })]);
  });

  it('issued tickets and other warnings are logged only', () => {
    const { base, seen, logger } = setup();
    emitAudit(logger, {
      event: AUDIT_EVENT,
      rpc: 'IssueJoinTicket',
      peer: '10.42.0.7:41234',
      variant: 'qemu-vtpm',
      outcome: 'issued',
      reason: 'ok',
      durationMs: 3,
    });
    logger.warn('Join audit', { outcome: 'refused' });
    logger.warn('Something else', { event: AUDIT_EVENT, outcome: 'refused' });
    logger.error('Failed');
    expect(seen).toEqual([]);
    expect(base.events).toHaveLength(4);
  });

  it('a recorder that throws never reaches the caller', () => {
    const base = new FakeLogger();
    const logger = withRefusalEvents(base, {
      refused: () => {
        throw new Error('boom');
      },
    });
    expect(() =>
      logger.warn('Join audit', {
        event: AUDIT_EVENT,
        outcome: 'refused',
        rpc: 'attested-tls',
        peer: 'x',
        reason: 'r',
      }),
    ).not.toThrow();
    expect(base.events).toHaveLength(1);
  });
});
