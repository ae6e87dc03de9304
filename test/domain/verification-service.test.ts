/**
 * The verification service's domain rules: the nonce bounds, the fixed user data, the cap on
 * documents issued at once with a bounded wait, the per-source cap, the deadline and the caller's
 * cancellation. The issuer is a hand-written stub whose quotes finish when the test says so; time is
 * a FakeClock.
 */
import { describe, expect, it } from 'vitest';
import {
  MAX_NONCE_BYTES,
  MIN_NONCE_BYTES,
  VERIFY_SERVICE_USER_DATA,
  VerificationService,
} from '../../src/domain/verification-service.js';
import { ConfbootError } from '../../src/ports/errors.js';
import type { CallOptions } from '../../src/ports/types.js';
import { FakeClock, flushMicrotasks } from '../fakes/fake-clock.js';

/** An issuer whose quotes wait until the test finishes them, recording every call. */
class StubIssuer {
  readonly variant = 'qemu-vtpm' as const;
  readonly oid = '1.3.9900.5.1';
  readonly calls: Array<{ userData: Uint8Array; nonce: Uint8Array; signal?: AbortSignal }> = [];
  readonly #pending: Array<{ resolve: (d: Uint8Array) => void; reject: (e: unknown) => void }> = [];
  issueErr: Error | undefined;
  /** Quotes run to the end even when their signal aborts (a TPM command in flight is not interrupted). */
  ignoreAbort = false;

  issue(userData: Uint8Array, nonce: Uint8Array, options?: CallOptions): Promise<Uint8Array> {
    this.calls.push({ userData, nonce, ...(options?.signal ? { signal: options.signal } : {}) });
    if (this.issueErr) return Promise.reject(this.issueErr);
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject });
      if (!this.ignoreAbort)
        options?.signal?.addEventListener('abort', () => reject(options.signal?.reason), { once: true });
    });
  }

  /** Finishes the oldest quote with a document naming its nonce. */
  finishOne(): void {
    const p = this.#pending.shift();
    const call = this.calls[this.calls.length - this.#pending.length - 1];
    p?.resolve(new TextEncoder().encode(`doc:${Buffer.from(call?.nonce ?? []).toString('hex')}`));
  }
}

const nonce = (fill: number, length = 32) => new Uint8Array(length).fill(fill);

function service(options: ConstructorParameters<typeof VerificationService>[2] = {}) {
  const issuer = new StubIssuer();
  const clock = new FakeClock();
  return { issuer, clock, svc: new VerificationService(issuer, clock, options) };
}

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return err instanceof ConfbootError ? `${err.code}${err.reason ? `/${err.reason}` : ''}` : String(err);
  }
}

describe('VerificationService', () => {
  it.each([
    ['a 31-byte nonce', MIN_NONCE_BYTES - 1],
    ['a 65-byte nonce', MAX_NONCE_BYTES + 1],
    ['an empty nonce', 0],
  ])('refuses %s as invalid-argument and issues nothing', async (_name, length) => {
    const { issuer, svc } = service();
    expect(await codeOf(svc.attest(nonce(1, length), { peerAddress: '10.0.0.1' }))).toBe('invalid-argument');
    expect(issuer.calls).toHaveLength(0);
  });

  it('issues with the fixed user data "VerifyService" and the caller\'s nonce as given', async () => {
    const { issuer, svc } = service();
    const answer = svc.attest(nonce(7, 64), { peerAddress: '10.0.0.1:5000' });
    await flushMicrotasks();
    issuer.finishOne();
    const doc = await answer;
    expect(Buffer.from(issuer.calls[0]?.userData ?? []).toString()).toBe('VerifyService');
    expect(issuer.calls[0]?.userData).toEqual(VERIFY_SERVICE_USER_DATA);
    expect(issuer.calls[0]?.nonce).toEqual(nonce(7, 64));
    expect(doc).toMatchObject({ variant: 'qemu-vtpm', oid: '1.3.9900.5.1' });
    expect(new TextDecoder().decode(doc.document)).toBe(`doc:${'07'.repeat(64)}`);
  });

  it('issues one document at a time; the next waiter starts when it finishes, in arrival order', async () => {
    const { issuer, svc } = service({ maxQuotes: 1, maxWaiting: 2, maxPerSource: 1 });
    const order: string[] = [];
    const calls = ['10.0.0.1', '10.0.0.2', '10.0.0.3'].map((ip, i) =>
      svc.attest(nonce(i + 1), { peerAddress: ip }).then(() => order.push(ip)),
    );
    await flushMicrotasks();
    expect(issuer.calls).toHaveLength(1);
    expect([svc.running, svc.waiting]).toEqual([1, 2]);
    issuer.finishOne();
    await flushMicrotasks();
    expect(issuer.calls).toHaveLength(2);
    issuer.finishOne();
    await flushMicrotasks();
    issuer.finishOne();
    await Promise.all(calls);
    expect(order).toEqual(['10.0.0.1', '10.0.0.2', '10.0.0.3']);
    expect([svc.running, svc.waiting]).toEqual([0, 0]);
  });

  it('refuses a request beyond the waiting bound at once (resource-exhausted/busy), issuing nothing for it', async () => {
    const { issuer, svc } = service({ maxQuotes: 1, maxWaiting: 1 });
    const first = svc.attest(nonce(1), { peerAddress: '10.0.0.1' });
    const second = svc.attest(nonce(2), { peerAddress: '10.0.0.2' });
    expect(await codeOf(svc.attest(nonce(3), { peerAddress: '10.0.0.3' }))).toBe('resource-exhausted/busy');
    issuer.finishOne();
    await flushMicrotasks();
    issuer.finishOne();
    await Promise.all([first, second]);
    expect(issuer.calls.map((c) => c.nonce[0])).toEqual([1, 2]);
  });

  it('refuses a second request of one source while its first is in progress, also from another port or address of its IPv6 /64', async () => {
    const { issuer, svc } = service({ maxWaiting: 4 });
    const first = svc.attest(nonce(1), { peerAddress: '10.0.0.1:1000' });
    expect(await codeOf(svc.attest(nonce(2), { peerAddress: '10.0.0.1:1001' }))).toBe(
      'resource-exhausted/per-source',
    );
    const v6 = svc.attest(nonce(3), { peerAddress: '[2001:db8::1]:1000' });
    expect(await codeOf(svc.attest(nonce(4), { peerAddress: '[2001:db8::2]:1000' }))).toBe(
      'resource-exhausted/per-source',
    );
    issuer.finishOne();
    await first;
    // The source's count is given back once its request ended.
    const again = svc.attest(nonce(5), { peerAddress: '10.0.0.1:1002' });
    await flushMicrotasks();
    issuer.finishOne();
    await flushMicrotasks();
    issuer.finishOne();
    await Promise.all([v6, again]);
    expect(issuer.calls.map((c) => c.nonce[0])).toEqual([1, 3, 5]);
  });

  it('a waiting request whose deadline passes leaves the queue (deadline-exceeded) and is never issued', async () => {
    const { issuer, clock, svc } = service({ requestTimeoutMs: 5000 });
    issuer.ignoreAbort = true;
    const first = svc.attest(nonce(1), { peerAddress: '10.0.0.1' });
    await clock.advance(1000);
    const late = svc.attest(nonce(2), { peerAddress: '10.0.0.2' });
    const lateCode = codeOf(late);
    await clock.advance(4500);
    // The first request's own deadline passed (5000 ms after its arrival): its caller is answered and
    // its quote's signal aborted, but the slot stays taken until the quote itself has ended.
    expect(await codeOf(first)).toBe('deadline-exceeded');
    expect(issuer.calls[0]?.signal?.aborted).toBe(true);
    expect([svc.running, svc.waiting]).toEqual([1, 1]);
    await clock.advance(1000);
    expect(await lateCode).toBe('deadline-exceeded');
    expect([svc.running, svc.waiting]).toEqual([1, 0]);
    issuer.finishOne();
    await flushMicrotasks();
    expect(issuer.calls).toHaveLength(1);
    expect([svc.running, svc.waiting]).toEqual([0, 0]);
  });

  it('a caller that goes away while waiting leaves the queue (unavailable); the slot goes to the next', async () => {
    const { issuer, svc } = service();
    const first = svc.attest(nonce(1), { peerAddress: '10.0.0.1' });
    const gone = new AbortController();
    const leaving = codeOf(svc.attest(nonce(2), { peerAddress: '10.0.0.2', signal: gone.signal }));
    const third = svc.attest(nonce(3), { peerAddress: '10.0.0.3' });
    gone.abort();
    expect(await leaving).toBe('unavailable');
    issuer.finishOne();
    await flushMicrotasks();
    issuer.finishOne();
    await Promise.all([first, third]);
    expect(issuer.calls.map((c) => c.nonce[0])).toEqual([1, 3]);
  });

  it('an issuer failure is internal, names the operation, and frees the slot', async () => {
    const { issuer, svc } = service();
    issuer.issueErr = new Error('TPM busy');
    const err = await svc.attest(nonce(1), { peerAddress: '10.0.0.1' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfbootError);
    expect((err as ConfbootError).code).toBe('internal');
    expect((err as Error).message).toBe('issuing an attestation document: TPM busy');
    expect(svc.running).toBe(0);
  });

  it.each([
    ['maxQuotes 0', { maxQuotes: 0 }],
    ['maxPerSource 0', { maxPerSource: 0 }],
    ['maxWaiting -1', { maxWaiting: -1 }],
    ['requestTimeoutMs 1.5', { requestTimeoutMs: 1.5 }],
  ])('refuses bounds that make no sense: %s', (_name, options) => {
    expect(() => service(options)).toThrow(/verification service: .* must be an integer/);
  });
});
