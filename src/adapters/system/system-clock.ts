/** The real clock: wall time and timer-based sleeps that stop promptly on abort. */
import type { Clock } from '../../ports/clock.js';

export class SystemClock implements Clock {
  /**
   * @param options.unrefTimers sleeps do not keep the process alive (for background work such as a
   *   file watcher's reload backoff)
   */
  constructor(private readonly options: { unrefTimers?: boolean } = {}) {}

  now(): Date {
    return new Date();
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason);
        return;
      }
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      if (this.options.unrefTimers) timer.unref?.();
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}
