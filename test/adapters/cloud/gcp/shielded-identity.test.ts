/**
 * BoundedShieldedIdentity, the gcp-sev-es Compute lookup built on BoundedLookups, under fake time
 * with a STUB Compute API: answers and failures cached per instance, one shared lookup per instance
 * that no caller can abort, and misses beyond the budget refused at once (recoverable), never queued.
 */
import { describe, expect, it } from 'vitest';
import { BoundedShieldedIdentity } from '../../../../src/adapters/cloud/gcp/shielded-identity.js';
import { LOOKUP_RECENTLY_FAILED } from '../../../../src/adapters/http/bounded-lookups.js';
import { ConfbootError, isConfbootError } from '../../../../src/ports/errors.js';
import type { GceShieldedIdentity } from '../../../../src/ports/gce-shielded-identity.js';
import type { CallOptions } from '../../../../src/ports/types.js';
import { FakeClock } from '../../../fakes/fake-clock.js';

const flush = async () => {
  for (let i = 0; i < 20; i++) await Promise.resolve();
};

/** STUB Compute API: instances it knows, calls and the options each call got; can hold answers. */
class StubGce implements GceShieldedIdentity {
  calls: string[] = [];
  options: (CallOptions | undefined)[] = [];
  hold = false;
  private gates: (() => void)[] = [];
  async signingKeyPem(project: string, zone: string, instance: string, options?: CallOptions) {
    this.calls.push(instance);
    this.options.push(options);
    if (this.hold) await new Promise<void>((r) => this.gates.push(r));
    if (instance.startsWith('ghost'))
      throw new ConfbootError('permission-denied', `getting ${project}/${zone}/${instance}: 404`);
    return `PEM of ${instance}`;
  }
  release(): void {
    for (const g of this.gates.splice(0)) g();
  }
}

const errorOf = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: unknown) => e as Error,
  );

describe('BoundedShieldedIdentity (STUB Compute API, fake clock)', () => {
  it('caches an instance, and refuses a failed instance without a request until its entry expires', async () => {
    const clock = new FakeClock();
    const stub = new StubGce();
    const gce = new BoundedShieldedIdentity(stub, { clock, negativeTtlInMs: 60_000 });
    expect(await gce.signingKeyPem('p', 'z', 'node-1')).toBe('PEM of node-1');
    expect(await gce.signingKeyPem('p', 'z', 'node-1')).toBe('PEM of node-1');
    const first = await errorOf(gce.signingKeyPem('p', 'z', 'ghost'));
    expect(isConfbootError(first) && first.code).toBe('permission-denied');
    await clock.advance(30_000);
    const again = await errorOf(gce.signingKeyPem('p', 'z', 'ghost'));
    expect(isConfbootError(again) && [again.code, again.reason]).toEqual([
      'permission-denied',
      LOOKUP_RECENTLY_FAILED,
    ]);
    expect(stub.calls).toEqual(['node-1', 'ghost']);
    await clock.advance(30_000);
    await errorOf(gce.signingKeyPem('p', 'z', 'ghost'));
    expect(stub.calls).toEqual(['node-1', 'ghost', 'ghost']);
  });

  it('an attacker naming fresh instances uses up the budget and is refused at once; a cached instance still answers', async () => {
    const clock = new FakeClock();
    const stub = new StubGce();
    stub.hold = true;
    const gce = new BoundedShieldedIdentity(stub, { clock, burst: 3 });
    stub.hold = false;
    await gce.signingKeyPem('p', 'z', 'node-1');
    stub.hold = true;
    const pending = [1, 2].map((i) => errorOf(gce.signingKeyPem('p', 'z', `ghost-${i}`)));
    const refused = await errorOf(gce.signingKeyPem('p', 'z', 'ghost-3'));
    expect(isConfbootError(refused) && [refused.code, refused.recoverable]).toEqual([
      'resource-exhausted',
      true,
    ]);
    expect(await gce.signingKeyPem('p', 'z', 'node-1')).toBe('PEM of node-1');
    expect(stub.calls).toEqual(['node-1', 'ghost-1', 'ghost-2']);
    stub.release();
    await Promise.all(pending);
  });

  it('shares one lookup per instance that runs without any caller signal; an aborting caller only detaches', async () => {
    const clock = new FakeClock();
    const stub = new StubGce();
    stub.hold = true;
    const gce = new BoundedShieldedIdentity(stub, { clock });
    const quitter = new AbortController();
    const abandoned = errorOf(
      gce.signingKeyPem('p', 'z', 'node-2', { signal: quitter.signal, timeoutInMs: 5000 }),
    );
    const honest = gce.signingKeyPem('p', 'z', 'node-2', { signal: new AbortController().signal });
    await flush();
    expect(stub.options).toEqual([{ timeoutInMs: 5000 }]);
    quitter.abort(new Error('peer closed'));
    expect((await abandoned)?.message).toMatch(/the caller stopped waiting/);
    stub.release();
    expect(await honest).toBe('PEM of node-2');
    expect(stub.calls).toEqual(['node-2']);
  });
});
