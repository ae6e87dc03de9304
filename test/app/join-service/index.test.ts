/**
 * The join service's public entry (src/app/join-service/index.ts): an embedder starts the service,
 * builds its guard and metrics, and reads its audit events from this one module.
 */
import { describe, expect, it } from 'vitest';
import * as joinService from '../../../src/app/join-service/index.js';

describe('join service entry', () => {
  it.each([
    'startJoinService',
    'startProductionJoinService',
    'validatorBuilder',
    'GuardedJoinCall',
    'joinGuards',
    'composeJoinGuards',
    'JoinServiceMetrics',
    'TokenBucketRateLimiter',
    'ConcurrencyLimiter',
    'startOperationsHttpServer',
    'HealthStatus',
    'TimedValidator',
    'emitAudit',
    'auditReasonOf',
  ])('exports %s', (name) => {
    expect(typeof (joinService as Record<string, unknown>)[name]).toBe('function');
  });

  it('exports the audit event names and the defaults', () => {
    expect(joinService.AUDIT_MESSAGE).toBe('Join audit');
    expect(joinService.AUDIT_EVENT).toBe('join-audit');
    expect(joinService.DEFAULT_MAX_CONCURRENT).toBeGreaterThan(0);
  });
});
