/**
 * The comparison `mini upgrade` makes between the dry run's predictions and the reboots' outcomes
 * (src/testbed/mini/stages/upgrade-steps.ts), without VMs: a refused A node and a rejoined B node agree
 * with "refused" and "accepted"; a step that did not hold, or a node without a record, does not.
 */
import { describe, expect, it } from 'vitest';
import { predictionSteps, type UpgradeStepResult } from '../../../src/testbed/mini/stages/upgrade-steps.js';

const step = (
  s: Partial<UpgradeStepResult> & Pick<UpgradeStepResult, 'step' | 'node' | 'ok'>,
): UpgradeStepResult => ({
  reason: '',
  seconds: 0,
  ...s,
});

describe('mini upgrade: prediction against outcome', () => {
  const final = step({
    step: 'dry-run',
    node: 'operator',
    ok: true,
    predictions: [
      { node: 'worker-0', predicted: 'refused', why: 'measurement-set-expired: …' },
      { node: 'worker-1', predicted: 'refused', why: 'measurement-set-expired: …' },
      { node: 'worker-2', predicted: 'accepted', why: 'ok' },
    ],
  });

  it('agrees per worker when the A nodes are refused as expired and the B node rejoins', () => {
    const steps = [
      step({ step: 'expired-reboot', node: 'worker-0', ok: true }),
      step({ step: 'expired-reboot', node: 'worker-1', ok: true }),
      step({ step: 'reboot-b', node: 'worker-2', ok: true }),
    ];
    const out = predictionSteps(steps, final, ['worker-0', 'worker-1', 'worker-2']);
    expect(out.map((s) => [s.node, s.ok, s.predictions?.[0]?.outcome])).toEqual([
      ['worker-0', true, 'refused'],
      ['worker-1', true, 'refused'],
      ['worker-2', true, 'accepted'],
    ]);
  });

  it('disagrees when an A node was not refused, the B node did not rejoin, or a node has no prediction', () => {
    const steps = [
      step({ step: 'expired-reboot', node: 'worker-0', ok: false }),
      step({ step: 'reboot-b', node: 'worker-2', ok: false }),
    ];
    const out = predictionSteps(steps, final, ['worker-0', 'worker-1', 'worker-2', 'worker-9']);
    expect(out.map((s) => [s.node, s.ok])).toEqual([
      ['worker-0', false],
      ['worker-1', false],
      ['worker-2', false],
      ['worker-9', false],
    ]);
  });
});
