/**
 * The in-memory log ring a failed init streams back: the last lines only, one JSON line per event of
 * the tee'd logger (level, message, bound and event fields), and the inner logger still gets every
 * event.
 */
import { describe, expect, it } from 'vitest';
import { RingLogCollector } from '../../../src/adapters/log/ring-log-collector.js';
import { FakeLogger } from '../../fakes/fake-logger.js';

const text = async (ring: RingLogCollector) => new TextDecoder().decode(await ring.collect());

describe('RingLogCollector', () => {
  it('is empty before anything is pushed', async () => {
    expect(await text(new RingLogCollector())).toBe('');
  });

  it('keeps only the last maxLines lines, in order, each ending in a newline', async () => {
    const ring = new RingLogCollector(3);
    for (const l of ['a', 'b', 'c', 'd', 'e']) ring.push(l);
    expect(await text(ring)).toBe('c\nd\ne\n');
  });

  it('tees every level to the inner logger and records a JSON line with bound and event fields', async () => {
    const ring = new RingLogCollector();
    const inner = new FakeLogger();
    const logger = ring.tee(inner, { component: 'init' });
    logger.debug('Starting', { step: 1 });
    logger.info('Joined');
    const child = logger.child({ node: 'cp-0' });
    child.warn('Slow', { ms: 5 });
    child.error('Failed', { component: 'override' });
    expect(inner.events.map((e) => [e.level, e.msg, e.fields])).toEqual([
      ['debug', 'Starting', { step: 1 }],
      ['info', 'Joined', {}],
      ['warn', 'Slow', { node: 'cp-0', ms: 5 }],
      ['error', 'Failed', { node: 'cp-0', component: 'override' }],
    ]);
    const lines = (await text(ring))
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines).toEqual([
      { level: 'debug', msg: 'Starting', component: 'init', step: 1 },
      { level: 'info', msg: 'Joined', component: 'init' },
      { level: 'warn', msg: 'Slow', component: 'init', node: 'cp-0', ms: 5 },
      { level: 'error', msg: 'Failed', component: 'override', node: 'cp-0' },
    ]);
  });
});
