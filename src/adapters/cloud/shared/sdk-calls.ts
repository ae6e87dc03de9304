/**
 * How the SDK-backed metadata adapters (AWS, Azure, GCP) run a cloud call: the provider's SDK is
 * imported lazily (a qemu node never loads one; loading takes up to a second), once per adapter, and
 * BEFORE the call's deadline starts — loading is local work and must not eat the cloud call's
 * budget. A failed load is retried by the next call. The call itself runs under {@link withDeadline}.
 */
import type { CallOptions } from '../../../ports/types.js';
import {
  type CommonCloudOptions,
  DEFAULT_CLOUD_TIMEOUT_IN_MS,
  type DeadlineSettings,
  toCloudError,
  withDeadline,
} from '../../http/call.js';

/** The {@link DeadlineSettings} an adapter's {@link CommonCloudOptions} ask for (default 10 s). */
export function deadlineSettings(options: CommonCloudOptions): DeadlineSettings {
  return {
    timeoutInMs: options.timeoutInMs ?? DEFAULT_CLOUD_TIMEOUT_IN_MS,
    ...(options.logger ? { logger: options.logger } : {}),
  };
}

/** Runs cloud calls once an SDK, imported on first use, has loaded. */
export class LazySdk {
  private loaded: Promise<void> | undefined;

  /** @param load imports the SDK's modules, e.g. `() => import('@google-cloud/compute')` */
  constructor(private readonly load: () => Promise<unknown>) {}

  /**
   * Loads the SDK (once) before the call's deadline starts, then runs the call under
   * {@link withDeadline}.
   * @throws ConfbootError naming `operation`, with `: loading the SDK` when the import failed
   */
  async call<T>(
    operation: string,
    settings: DeadlineSettings,
    options: CallOptions | undefined,
    fn: (signal: AbortSignal) => Promise<T>,
  ): Promise<T> {
    this.loaded ??= this.load().then(
      () => undefined,
      (err: unknown) => {
        this.loaded = undefined;
        throw err;
      },
    );
    try {
      await this.loaded;
    } catch (err) {
      throw toCloudError(`${operation}: loading the SDK`, err);
    }
    return withDeadline(operation, settings, options, fn);
  }
}
