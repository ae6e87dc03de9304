/**
 * The pace between join rounds, under a fake clock and scripted random floats: a round a running
 * service refused waits the capped exponential backoff with full jitter; while nothing listens the
 * wait is uniform in [minMs, maxMs), doubling per quiet round up to the cap, and starts over after
 * a refused round; refused attempts are logged once per interval with a count; a refused TCP
 * connection is told apart from every other refusal by its reason.
 */
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_NOT_LISTENING_RETRY,
  isNothingListening,
  NOT_LISTENING_LOG_INTERVAL_MS,
  RoundPacer,
} from '../../src/domain/round-pacer.js';
import { CONNECTION_REFUSED, ConfbootError } from '../../src/ports/errors.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { FakeLogger } from '../fakes/fake-logger.js';

const BACKOFF = { initialMs: 1_000, maxMs: 8_000 };
/** A random source that answers `f` every time. */
const always = (f: number) => ({ float: () => f });

describe('RoundPacer.afterRound', () => {
  it('while nothing listens: 250-500 ms, then 0.5-1 s, then 1-2 s and no more', () => {
    const pacer = new RoundPacer(BACKOFF, {}, 'refused');
    const low = [0, 1, 2, 3, 4].map(() => pacer.afterRound(true, always(0)));
    expect(low).toEqual([250, 500, 1_000, 1_000, 1_000]);
    const high = new RoundPacer(BACKOFF, {}, 'refused');
    expect([0, 1, 2, 3].map(() => high.afterRound(true, always(0.999_999)))).toEqual([
      499, 999, 1_999, 1_999,
    ]);
  });

  it('after a refused round: full-jitter backoff that doubles to its cap, whatever came before', () => {
    const pacer = new RoundPacer(BACKOFF, {}, 'refused');
    expect([0, 1, 2, 3, 4].map(() => pacer.afterRound(false, always(0.5)))).toEqual([
      500, 1_000, 2_000, 4_000, 4_000,
    ]);
  });

  it('a round in which a service answered starts the not-listening interval over', () => {
    const pacer = new RoundPacer(BACKOFF, { minMs: 100, maxMs: 200, capMs: 800 }, 'refused');
    expect(pacer.afterRound(true, always(0))).toBe(100);
    expect(pacer.afterRound(true, always(0))).toBe(200);
    pacer.afterRound(false, always(0));
    expect(pacer.afterRound(true, always(0))).toBe(100);
  });

  it('clamps random floats outside [0, 1]', () => {
    const pacer = new RoundPacer(BACKOFF, {}, 'refused');
    expect(pacer.afterRound(true, always(-3))).toBe(DEFAULT_NOT_LISTENING_RETRY.minMs);
    expect(new RoundPacer(BACKOFF, {}, 'r').afterRound(false, always(7))).toBe(BACKOFF.initialMs);
  });

  it.each([
    { minMs: -1 },
    { minMs: 600, maxMs: 500 },
    { capMs: Number.NaN },
    { maxMs: Number.POSITIVE_INFINITY },
  ])('refuses the not-listening bounds %o as invalid-argument', (retry) => {
    expect(() => new RoundPacer(BACKOFF, retry, 'refused')).toThrow(/invalid not-listening retry/);
  });
});

describe('RoundPacer.refused', () => {
  it('logs the first refusal at once, then one line per interval with the count since the last', async () => {
    const clock = new FakeClock();
    const logger = new FakeLogger();
    const pacer = new RoundPacer(BACKOFF, {}, 'Join service not listening yet');
    const err = new Error('connect ECONNREFUSED');
    pacer.refused(clock, logger, '10.0.0.1:30090', err);
    for (let i = 0; i < 3; i++) {
      await clock.advance(1_000);
      pacer.refused(clock, logger, '10.0.0.2:30090', err);
    }
    await clock.advance(NOT_LISTENING_LOG_INTERVAL_MS);
    pacer.refused(clock, logger, '10.0.0.3:30090', err);
    expect(logger.events).toEqual([
      {
        level: 'warn',
        msg: 'Join service not listening yet',
        fields: { endpoint: '10.0.0.1:30090', error: 'connect ECONNREFUSED', refusedSinceLastLine: 1 },
      },
      {
        level: 'warn',
        msg: 'Join service not listening yet',
        fields: { endpoint: '10.0.0.3:30090', error: 'connect ECONNREFUSED', refusedSinceLastLine: 4 },
      },
    ]);
  });
});

describe('isNothingListening', () => {
  it('is true only for an error carrying the connection-refused reason', () => {
    const refused = new ConfbootError('unavailable', 'dialing: refused', { reason: CONNECTION_REFUSED });
    expect(isNothingListening(refused)).toBe(true);
    expect(isNothingListening(new ConfbootError('unavailable', 'ECONNREFUSED'))).toBe(false);
    expect(isNothingListening(new ConfbootError('resource-exhausted', 'busy'))).toBe(false);
    expect(isNothingListening(new Error('connection-refused'))).toBe(false);
  });
});
