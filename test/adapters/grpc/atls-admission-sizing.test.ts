/**
 * Handshake sizing of the attested TLS listener (admission-sizing.ts): the sized cap follows the
 * measured event-loop cost of a handshake within its bounds, windows without a finished handshake
 * change nothing, the sampler turns timer windows into measurements (fake timers and a fake
 * busy-time source), and on real loopback TLS a ClientHello that arrives while the sized number of
 * handshakes is in progress is closed before TLS while the fixed caps would still admit it.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { DropReason } from '../../../src/adapters/grpc/atls/admission.js';
import {
  DEFAULT_SIZING_FLOOR,
  HandshakeCostSampler,
  HandshakeSizing,
} from '../../../src/adapters/grpc/atls/admission-sizing.js';
import { AttestedTlsListener } from '../../../src/adapters/grpc/atls/listener.js';
import { DummyValidator } from '../../support/dummy-attestation.js';
import { rawTlsClient } from '../../support/raw-atls-client.js';
import { clock } from './helpers.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe('HandshakeSizing', () => {
  it('allows deadline × safety ÷ cost handshakes, starting from the assumed cost', () => {
    const s = new HandshakeSizing({ tlsHandshakeMs: 5_000, maxInProgress: 2_048, initialCostMs: 4 });
    expect(s.costMs).toBe(4);
    expect(s.cap).toBe(1_250); // 5,000 × 1 ÷ 4
    const half = new HandshakeSizing({ tlsHandshakeMs: 5_000, maxInProgress: 2_048, safety: 0.5 });
    expect(half.cap).toBe(625);
  });

  it('moves the cost toward each window’s busy time per finished handshake', () => {
    const s = new HandshakeSizing({
      tlsHandshakeMs: 5_000,
      maxInProgress: 2_048,
      initialCostMs: 4,
      weight: 0.5,
    });
    s.record(100, 10); // 10 ms each
    expect(s.costMs).toBe(7);
    for (let i = 0; i < 60; i++) s.record(100, 10);
    expect(s.costMs).toBeCloseTo(10, 6);
    expect(s.cap).toBe(500);
    for (let i = 0; i < 60; i++) s.record(40, 10); // 4 ms each
    expect(s.cap).toBe(1_250);
  });

  it('ignores windows in which no handshake finished (silent connections cost nothing)', () => {
    const s = new HandshakeSizing({ tlsHandshakeMs: 5_000, maxInProgress: 2_048 });
    const before = s.costMs;
    s.record(10_000, 0);
    s.record(Number.NaN, 3);
    expect(s.costMs).toBe(before);
  });

  it('stays within the floor and the configured cap', () => {
    const slow = new HandshakeSizing({ tlsHandshakeMs: 1_000, maxInProgress: 2_048, initialCostMs: 1_000 });
    expect(slow.cap).toBe(DEFAULT_SIZING_FLOOR);
    const fast = new HandshakeSizing({ tlsHandshakeMs: 60_000, maxInProgress: 500, initialCostMs: 0.1 });
    expect(fast.cap).toBe(500);
    const small = new HandshakeSizing({ tlsHandshakeMs: 1_000, maxInProgress: 10, initialCostMs: 1_000 });
    expect(small.cap).toBe(10);
  });

  it('refuses options out of range', () => {
    expect(() => new HandshakeSizing({ tlsHandshakeMs: 0, maxInProgress: 1 })).toThrow(/tlsHandshakeMs/);
    expect(() => new HandshakeSizing({ tlsHandshakeMs: 1, maxInProgress: 0 })).toThrow(/cap/);
    expect(() => new HandshakeSizing({ tlsHandshakeMs: 1, maxInProgress: 1, safety: 2 })).toThrow(/safety/);
    expect(() => new HandshakeSizing({ tlsHandshakeMs: 1, maxInProgress: 1, weight: 0 })).toThrow(/weight/);
    expect(() => new HandshakeSizing({ tlsHandshakeMs: 1, maxInProgress: 1, initialCostMs: -1 })).toThrow(
      /initialCostMs/,
    );
  });
});

describe('HandshakeCostSampler (fake timers, fake busy time)', () => {
  it('closes a window per interval with the busy time and the handshakes finished in it', () => {
    vi.useFakeTimers();
    let busy = 1_000;
    const sizing = new HandshakeSizing({
      tlsHandshakeMs: 5_000,
      maxInProgress: 2_048,
      initialCostMs: 4,
      weight: 1,
    });
    const sampler = new HandshakeCostSampler(sizing, { intervalMs: 250, busyMs: () => busy });
    sampler.start();
    cleanups.push(() => sampler.stop());
    for (let i = 0; i < 20; i++) sampler.finished();
    busy += 200; // 10 ms per handshake
    vi.advanceTimersByTime(250);
    expect(sizing.costMs).toBe(10);
    expect(sizing.cap).toBe(500);
    // A window with busy time but no finished handshake leaves the measurement alone.
    busy += 200;
    vi.advanceTimersByTime(250);
    expect(sizing.costMs).toBe(10);
    sampler.stop();
    sampler.finished();
    busy += 1;
    vi.advanceTimersByTime(1_000);
    expect(sizing.costMs).toBe(10);
  });
});

describe('the listener with sized handshakes (real loopback TLS)', () => {
  async function listenerWith(sizedHandshakes: false | { floor: number; initialCostMs: number }) {
    const dropped: DropReason[] = [];
    const listener = new AttestedTlsListener(
      { validators: [new DummyValidator()], clock, sizedHandshakes },
      () => {},
    );
    listener.onDropped = (_a, r) => dropped.push(r);
    const port = await listener.listen('127.0.0.1', 0);
    cleanups.push(() => listener.close());
    return { listener, port, dropped };
  }

  it('closes a ClientHello that arrives while the sized number of handshakes is in progress', async () => {
    // Assumed cost 10 s a handshake against the 5 s deadline (0 fit): the floor, one at a time.
    const { listener, port, dropped } = await listenerWith({ floor: 1, initialCostMs: 10_000 });
    expect(listener.handshakes.cap).toBe(1);
    const first = await rawTlsClient(port); // stays in its attestation exchange
    cleanups.push(() => first.socket.destroy());
    expect(listener.handshakes.inProgress).toBe(1);
    await expect(rawTlsClient(port)).rejects.toThrow(/closed during the TLS handshake/);
    expect(dropped).toEqual(['global-cap']);
    expect(listener.handshakes.inProgress).toBe(1);
    expect(listener.pendingHandshakes).toBe(1);
  });

  it('without sizing the same second connection gets its handshake (the fixed caps admit it)', async () => {
    const { listener, port, dropped } = await listenerWith(false);
    const first = await rawTlsClient(port);
    cleanups.push(() => first.socket.destroy());
    const second = await rawTlsClient(port);
    cleanups.push(() => second.socket.destroy());
    expect(dropped).toEqual([]);
    expect(listener.handshakes.inProgress).toBe(2);
  });
});
