/**
 * The guard's metrics: every decision counted once by rpc, outcome, variant and its reason code
 * (`ok` when issued, `internal` for anything without a code) and timed by rpc and outcome.
 */
import { describe, expect, it } from 'vitest';
import { countDecisions } from '../../../../src/app/join-service/guard/metrics.js';
import { ConfbootError } from '../../../../src/ports/errors.js';
import type { JoinMetrics } from '../../../../src/ports/join-metrics.js';
import { guardedCall, issued, refused } from './support.js';

function recording() {
  const counted: Array<Parameters<JoinMetrics['countRequest']>[0]> = [];
  const timed: Array<Parameters<JoinMetrics['observeSeconds']>[0]> = [];
  return {
    counted,
    timed,
    metrics: {
      countRequest: (l: (typeof counted)[number]) => void counted.push(l),
      observeSeconds: (l: (typeof timed)[number], s: number) => {
        expect(s).toBeGreaterThanOrEqual(0);
        timed.push(l);
      },
    },
  };
}

describe('countDecisions', () => {
  it.each([
    ['an issued ticket', issued, 'issued', 'ok'],
    [
      'a refusal with its code',
      () => refused(new ConfbootError('permission-denied', 'bound', { reason: 'disk-bound' })),
      'refused',
      'disk-bound',
    ],
    ['a refusal without a code', () => refused(new Error('boom: /etc/secret')), 'refused', 'internal'],
  ] as const)('%s', async (_name, next, outcome, reason) => {
    const { counted, timed, metrics } = recording();
    await countDecisions(metrics)(guardedCall(), next);
    expect(counted).toEqual([{ rpc: 'IssueJoinTicket', outcome, variant: 'qemu-vtpm', reason }]);
    expect(timed).toEqual([{ rpc: 'IssueJoinTicket', outcome }]);
  });
});
