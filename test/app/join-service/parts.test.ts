/**
 * The join service's parts on their own: deny-list parsing, the per-IP token bucket under fake
 * time, the concurrency cap, peer-address parsing and the hand-written grpc.health.v1 codec.
 */
import { describe, expect, it } from 'vitest';
import { parseDenyList } from '../../../src/adapters/fs/file-deny-list.js';
import {
  decodeHealthCheckRequest,
  decodeHealthCheckResponse,
  encodeHealthCheckRequest,
  encodeHealthCheckResponse,
  HealthStatus,
  ServingStatus,
} from '../../../src/adapters/ops/grpc-health.js';
import { ConcurrencyLimiter, TokenBucketRateLimiter } from '../../../src/adapters/ops/limits.js';
import { peerHost } from '../../../src/ports/peer-address.js';
import { FakeClock } from '../../fakes/fake-clock.js';

describe('deny list parsing', () => {
  it('normalises node names like the ticket issuer and lower-cases disk UUIDs', () => {
    const d = parseDenyList(
      '{"nodes": ["Worker_3", " cp-1 "], "diskUuids": ["ABCDEF01-0000-4000-8000-000000000000"]}',
    );
    expect([...d.nodes]).toEqual(['worker-3', 'cp-1']);
    expect([...d.diskUuids]).toEqual(['abcdef01-0000-4000-8000-000000000000']);
    expect(parseDenyList('{}').nodes.size).toBe(0);
  });

  it.each([
    ['not JSON', 'nodes: [a]', /not JSON/],
    ['an array', '["worker-1"]', /must be an object/],
    ['a misspelt key', '{"node": ["worker-1"]}', /unknown field "node"/],
    ['a non-list', '{"nodes": "worker-1"}', /"nodes" must be an array/],
    ['an empty name', '{"nodes": [""]}', /"nodes"\[0\] must be a non-empty string/],
    ['a number', '{"diskUuids": [7]}', /"diskUuids"\[0\]/],
  ])('refuses %s', (_n, text, message) => {
    expect(() => parseDenyList(text)).toThrow(message);
  });
});

describe('per-source token bucket', () => {
  it('allows a burst, refuses beyond it, and refills with the clock', async () => {
    const clock = new FakeClock();
    const rl = new TokenBucketRateLimiter({ ratePerSecond: 2, burst: 3, clock });
    expect([1, 2, 3, 4].map(() => rl.tryTake('10.0.0.1'))).toEqual([true, true, true, false]);
    expect(rl.tryTake('10.0.0.2')).toBe(true);
    expect(rl.retryAfterSeconds('10.0.0.1')).toBeCloseTo(0.5);
    await clock.advance(499);
    expect(rl.tryTake('10.0.0.1')).toBe(false);
    await clock.advance(1);
    expect(rl.tryTake('10.0.0.1')).toBe(true);
    await clock.advance(60_000);
    expect([1, 2, 3, 4].map(() => rl.tryTake('10.0.0.1'))).toEqual([true, true, true, false]);
  });

  it('is off at rate 0, rejects nonsense, and forgets idle sources when many are tracked', async () => {
    const clock = new FakeClock();
    const off = new TokenBucketRateLimiter({ ratePerSecond: 0, clock });
    expect(Array.from({ length: 100 }, () => off.tryTake('a')).every(Boolean)).toBe(true);
    expect(() => new TokenBucketRateLimiter({ ratePerSecond: -1, clock })).toThrow(/≥ 0/);
    expect(() => new TokenBucketRateLimiter({ ratePerSecond: 1, burst: 0, clock })).toThrow(/burst/);
    const rl = new TokenBucketRateLimiter({ ratePerSecond: 1, clock, maxTrackedSources: 3 });
    for (const ip of ['a', 'b', 'c']) rl.tryTake(ip);
    await clock.advance(1_000);
    rl.tryTake('d');
    expect(rl.trackedSources).toBe(1);
  });

  it('gives one IPv6 /64 one bucket: a host cannot rotate through its addresses', () => {
    const clock = new FakeClock();
    const rl = new TokenBucketRateLimiter({ ratePerSecond: 1, burst: 2, clock });
    expect(rl.tryTake('2001:db8:0:1::1')).toBe(true);
    expect(rl.tryTake('2001:db8:0:1::2')).toBe(true);
    expect(rl.tryTake('2001:db8:0:1:aaaa::3')).toBe(false);
    expect(rl.retryAfterSeconds('2001:db8:0:1::4')).toBeCloseTo(1);
    expect(rl.tryTake('2001:db8:0:2::1')).toBe(true);
    expect(rl.trackedSources).toBe(2);
  });

  it('keys sources by IP, IPv4 and IPv6', () => {
    expect(peerHost('10.0.0.3:40000')).toBe('10.0.0.3');
    expect(peerHost('[fd00::3]:40000')).toBe('fd00::3');
    expect(peerHost('::ffff:127.0.0.1:5555')).toBe('::ffff:127.0.0.1');
    expect(peerHost('unix-socket')).toBe('unix-socket');
  });
});

describe('concurrency cap', () => {
  it('hands out at most max slots; release is idempotent; 0 disables', () => {
    const c = new ConcurrencyLimiter(2);
    const a = c.tryAcquire();
    const b = c.tryAcquire();
    expect(c.tryAcquire()).toBeUndefined();
    a?.();
    a?.();
    expect(c.inFlight).toBe(1);
    expect(c.tryAcquire()).toBeDefined();
    b?.();
    const off = new ConcurrencyLimiter(0);
    expect(Array.from({ length: 10 }, () => off.tryAcquire()).every((r) => r !== undefined)).toBe(true);
    expect(() => new ConcurrencyLimiter(1.5)).toThrow(/integer/);
  });
});

describe('grpc.health.v1 codec', () => {
  it('encodes like protoc (proto3 defaults omitted) and round-trips', () => {
    expect(Buffer.from(encodeHealthCheckRequest({ service: 'join.API' })).toString('hex')).toBe(
      `0a08${Buffer.from('join.API').toString('hex')}`,
    );
    expect(encodeHealthCheckRequest({ service: '' })).toHaveLength(0);
    expect(Buffer.from(encodeHealthCheckResponse({ status: ServingStatus.SERVING })).toString('hex')).toBe(
      '0801',
    );
    expect(decodeHealthCheckRequest(encodeHealthCheckRequest({ service: 'x' }))).toEqual({ service: 'x' });
    expect(decodeHealthCheckResponse(Uint8Array.of(0x08, 0x02))).toEqual({
      status: ServingStatus.NOT_SERVING,
    });
  });

  it('skips unknown fields and throws on truncated input', () => {
    // field 2 (varint 5) before field 1
    expect(decodeHealthCheckRequest(Uint8Array.of(0x10, 0x05, 0x0a, 0x01, 0x61))).toEqual({ service: 'a' });
    expect(() => decodeHealthCheckRequest(Uint8Array.of(0x0a, 0x05, 0x61))).toThrow();
  });

  it('tracks statuses and reports NOT_SERVING everywhere at shutdown', () => {
    const h = new HealthStatus({ '': ServingStatus.SERVING, 'join.API': ServingStatus.SERVING });
    h.shutdown();
    expect([h.get(''), h.get('join.API'), h.get('other')]).toEqual([
      ServingStatus.NOT_SERVING,
      ServingStatus.NOT_SERVING,
      undefined,
    ]);
  });
});
