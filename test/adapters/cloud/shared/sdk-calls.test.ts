/**
 * LazySdk and deadlineSettings (shared by the AWS, Azure and GCP metadata adapters): the SDK is
 * imported once across calls, a failed import is a ConfbootError naming the call and is retried by
 * the next call, and loading happens before the call's deadline starts. The "SDK" is a loader
 * function; the adapters' own tests load the real ones.
 */
import { describe, expect, it } from 'vitest';
import { deadlineSettings, LazySdk } from '../../../../src/adapters/cloud/shared/sdk-calls.js';
import { DEFAULT_CLOUD_TIMEOUT_IN_MS } from '../../../../src/adapters/http/call.js';
import { isConfbootError } from '../../../../src/ports/errors.js';
import type { Logger } from '../../../../src/ports/logger.js';

const settings = { timeoutInMs: 5_000 };

describe('LazySdk', () => {
  it('imports the SDK once for every call', async () => {
    let loads = 0;
    const sdk = new LazySdk(async () => {
      loads++;
    });
    const results = await Promise.all([
      sdk.call('first call', settings, undefined, async () => 1),
      sdk.call('second call', settings, undefined, async () => 2),
    ]);
    expect(await sdk.call('third call', settings, undefined, async () => 3)).toBe(3);
    expect(results).toEqual([1, 2]);
    expect(loads).toBe(1);
  });

  it('reports a failed import as a ConfbootError naming the call, and retries it on the next call', async () => {
    let loads = 0;
    const sdk = new LazySdk(async () => {
      loads++;
      if (loads === 1) throw Object.assign(new Error('Cannot find module'), { code: 'ERR_MODULE_NOT_FOUND' });
    });
    let ran = false;
    const err = await sdk
      .call('listing instances on Test', settings, undefined, async () => {
        ran = true;
      })
      .catch((e: unknown) => e);
    expect(isConfbootError(err)).toBe(true);
    expect((err as Error).message).toBe('listing instances on Test: loading the SDK: Cannot find module');
    expect(ran).toBe(false);
    expect(await sdk.call('listing instances on Test', settings, undefined, async () => 'ok')).toBe('ok');
    expect(loads).toBe(2);
  });

  it('starts the deadline only once the SDK has loaded', async () => {
    // The import takes longer than the whole 1 ms budget; the call still succeeds.
    const sdk = new LazySdk(() => new Promise((resolve) => setTimeout(resolve, 30)));
    await expect(sdk.call('slow import', { timeoutInMs: 1 }, undefined, async () => 'done')).resolves.toBe(
      'done',
    );
  });

  it('runs the call under its deadline', async () => {
    const sdk = new LazySdk(async () => {});
    const err = await sdk
      .call('hanging call', { timeoutInMs: 20 }, undefined, () => new Promise<never>(() => {}))
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'unavailable', message: 'hanging call: timed out after 20 ms' });
  });
});

describe('deadlineSettings', () => {
  it('defaults to the shared cloud timeout and keeps the logger only when given', () => {
    expect(deadlineSettings({})).toEqual({ timeoutInMs: DEFAULT_CLOUD_TIMEOUT_IN_MS });
    const logger = {} as Logger;
    expect(deadlineSettings({ timeoutInMs: 250, logger })).toEqual({ timeoutInMs: 250, logger });
  });
});
