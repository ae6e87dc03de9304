/**
 * How the long-running `confboot` subcommands (join-service, key-service, metadata-server,
 * bootstrapper, and the testbed's demo and mini) stop: the first SIGTERM or SIGINT aborts a signal
 * the command's work watches, after which the command shuts down cleanly. Each listener is registered once, so a second signal gets Node's default
 * handling (the process ends) — an operator can still force a stuck shutdown.
 */

/** Options of {@link untilStopSignal}. */
export interface StopSignalOptions {
  /** Called with the signal's name before the work's signal aborts (e.g. to log it). */
  onSignal?: (signal: NodeJS.Signals) => void;
  /** Also stop when this aborts (in-process callers, tests). */
  signal?: AbortSignal;
}

/**
 * Runs `work` with an AbortSignal that aborts on the first SIGTERM or SIGINT (or when
 * `options.signal` aborts), and removes its listeners once `work` settles.
 */
export async function untilStopSignal<T>(
  work: (stop: AbortSignal) => Promise<T>,
  options: StopSignalOptions = {},
): Promise<T> {
  const stop = new AbortController();
  const onSignal = (sig: NodeJS.Signals) => {
    options.onSignal?.(sig);
    stop.abort();
  };
  const onAbort = () => stop.abort();
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  if (options.signal?.aborted) stop.abort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await work(stop.signal);
  } finally {
    process.removeListener('SIGTERM', onSignal);
    process.removeListener('SIGINT', onSignal);
    options.signal?.removeEventListener('abort', onAbort);
  }
}
