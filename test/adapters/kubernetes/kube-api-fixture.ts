/**
 * A simulated Kubernetes API per test for the Kubernetes adapter tests: started on loopback with a
 * kubeconfig for it, checked after each test for requests it refused, and closed.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect } from 'vitest';
import { ConfbootError } from '../../../src/ports/errors.js';
import { useTmpDirs } from '../../support/tmp.js';
import { FakeKubeApi } from './fake-kube-api.js';

/**
 * Returns a function that starts a simulated API server with a kubeconfig file for it; after each
 * test it expects no refused request and closes every server started.
 */
export function useFakeKubeApis(): () => Promise<{ api: FakeKubeApi; kubeconfigPath: string }> {
  const tmp = useTmpDirs('confboot-kube-api-');
  const apis: FakeKubeApi[] = [];
  afterEach(async () => {
    for (const api of apis.splice(0)) {
      expect(api.violations, 'requests the simulated API refused').toEqual([]);
      await api.close();
    }
  });
  return async () => {
    const api = await new FakeKubeApi().start();
    apis.push(api);
    const kubeconfigPath = join(tmp(), 'kubeconfig');
    writeFileSync(kubeconfigPath, api.kubeconfig());
    return { api, kubeconfigPath };
  };
}

/** The ConfbootError `p` rejects with (fails the test for anything else). */
export async function rejectionOf(p: Promise<unknown>): Promise<ConfbootError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof ConfbootError)) throw new Error(`expected a ConfbootError, got ${String(err)}`);
  return err;
}

/** The fake clock's start in these tests. */
export const START = Date.UTC(2026, 10, 21, 12, 0, 0);
