import type { Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ConnectionCaps, DropSummary, Slots } from '../../../../src/adapters/grpc/atls/admission-limits.js';
import { isConfbootError } from '../../../../src/ports/errors.js';

const sock = () => ({}) as Socket;

describe('ConnectionCaps', () => {
  it('refuses a source at its cap, and others still get in', () => {
    const caps = new ConnectionCaps(2, 10);
    expect(caps.admit('a', sock()).admitted).toBe(true);
    expect(caps.admit('a', sock()).admitted).toBe(true);
    expect(caps.admit('a', sock())).toEqual({ admitted: false, reason: 'source-cap' });
    expect(caps.admit('b', sock()).admitted).toBe(true);
    expect([caps.size, caps.sources]).toEqual([3, 2]);
  });

  it('at the global cap evicts the oldest connection of the heaviest source for a lighter one', () => {
    const caps = new ConnectionCaps(10, 4);
    const first = sock();
    caps.admit('heavy', first);
    caps.admit('heavy', sock());
    caps.admit('heavy', sock());
    caps.admit('light', sock());
    const r = caps.admit('new', sock());
    expect(r).toEqual({ admitted: true, evicted: first });
    expect(caps.size).toBe(4);
    // Now heavy 2, light 1, new 1: a second connection of "new" would make it 2 — not lighter.
    expect(caps.admit('new', sock())).toEqual({ admitted: false, reason: 'global-cap' });
  });

  it('counts IPv6 sources per /64: one host cycling through its /64 meets the per-source cap', () => {
    const caps = new ConnectionCaps(2, 100);
    const a1 = sock();
    expect(caps.admit('2001:db8:0:1::1', a1).admitted).toBe(true);
    expect(caps.admit('2001:db8:0:1:ffff::2', sock()).admitted).toBe(true);
    expect(caps.admit('2001:db8:0:1:1234:5678:9abc:def0', sock())).toEqual({
      admitted: false,
      reason: 'source-cap',
    });
    // Another /64 and an IPv4 source have caps of their own.
    expect(caps.admit('2001:db8:0:2::1', sock()).admitted).toBe(true);
    expect(caps.admit('::ffff:10.0.0.1', sock()).admitted).toBe(true);
    expect(caps.admit('10.0.0.1', sock()).admitted).toBe(true);
    expect(caps.admit('10.0.0.1', sock())).toEqual({ admitted: false, reason: 'source-cap' });
    expect([caps.size, caps.sources]).toEqual([5, 3]);
    // A release by the connection's own address frees its /64's place.
    caps.release('2001:db8:0:1::1', a1);
    expect(caps.admit('2001:db8:0:1::99', sock()).admitted).toBe(true);
  });

  it('at the global cap, a /64 with many addresses is the heaviest source and is evicted first', () => {
    const caps = new ConnectionCaps(10, 3);
    const first = sock();
    caps.admit('2001:db8:0:1::1', first);
    caps.admit('2001:db8:0:1::2', sock());
    caps.admit('2001:db8:0:1::3', sock());
    expect(caps.admit('2001:db8:0:9::1', sock())).toEqual({ admitted: true, evicted: first });
  });

  it('release forgets a connection once (idempotent)', () => {
    const caps = new ConnectionCaps(1, 1);
    const s = sock();
    caps.admit('a', s);
    caps.release('a', s);
    caps.release('a', s);
    expect([caps.size, caps.sources]).toEqual([0, 0]);
    expect(() => new ConnectionCaps(0, 1)).toThrow(/per source/);
    expect(() => new ConnectionCaps(1, 0.5)).toThrow(/in total/);
  });
});

describe('Slots', () => {
  it('with a waiting cap, refuses one more waiter at once (recoverable) instead of queueing it', async () => {
    const slots = new Slots(1, 1, 'quotes');
    const signal = new AbortController().signal;
    const held = await slots.acquire(signal);
    const waiting = slots.acquire(signal);
    const refused = await slots.acquire(signal).catch((e: unknown) => e);
    expect(isConfbootError(refused) && [refused.code, refused.recoverable, refused.message]).toEqual([
      'resource-exhausted',
      true,
      'all 1 quotes are in use and 1 are waiting; retry later',
    ]);
    held();
    (await waiting)();
    expect([slots.inUse, slots.waiting]).toEqual([0, 0]);
  });

  it('grants in FIFO order and lets an aborted waiter leave', async () => {
    const slots = new Slots(1);
    const order: string[] = [];
    const first = await slots.acquire(new AbortController().signal);
    const gone = new AbortController();
    const waiting = [
      slots.acquire(gone.signal).then(
        () => order.push('aborted one granted'),
        () => order.push('aborted one left'),
      ),
      slots.acquire(new AbortController().signal).then((r) => {
        order.push('second');
        r();
      }),
    ];
    expect(slots.waiting).toBe(2);
    gone.abort(new Error('gone'));
    first();
    first();
    await Promise.all(waiting);
    expect(order).toEqual(['aborted one left', 'second']);
    expect([slots.inUse, slots.waiting]).toEqual([0, 0]);
  });
});

describe('DropSummary', () => {
  it('writes one line for many drops, with counts by reason and the top sources', () => {
    const lines: Array<Record<string, unknown> | undefined> = [];
    const logger = { warn: (_m: string, f?: Record<string, unknown>) => lines.push(f) } as never;
    const summary = new DropSummary({ logger, intervalMs: 60_000 });
    for (let i = 0; i < 500; i++) summary.add('source-cap', '127.0.0.9');
    summary.add('client-hello-timeout', '127.0.0.8');
    expect(lines).toHaveLength(0);
    summary.flush();
    summary.flush();
    expect(lines).toEqual([
      expect.objectContaining({
        total: 501,
        byReason: { 'source-cap': 500, 'client-hello-timeout': 1 },
        topSources: ['127.0.0.9 (500)', '127.0.0.8 (1)'],
      }),
    ]);
  });
});
