/** Real swtpm instances for tests, always stopped (and their temp state removed) after each test. */
import { afterEach } from 'vitest';
import { type SwtpmInstance, type SwtpmOptions, startSwtpm } from '../../src/adapters/tpm/swtpm.js';

/** Returns a function that starts a swtpm; every one started is stopped after each test. */
export function useSwtpm(): (options?: SwtpmOptions) => Promise<SwtpmInstance> {
  const running: SwtpmInstance[] = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((s) => s.stop()));
  });
  return async (options) => {
    const tpm = await startSwtpm(options);
    running.push(tpm);
    return tpm;
  };
}
