/**
 * Waiting, shared by the join flow and the disk mapper: sleeps on the injected Clock that end early
 * (and say so) when the flow is stopped, and the poll for this node's own metadata that both run
 * before they dial a join service (a new VM's metadata may not name it or its role yet).
 */
import type { Clock } from '../ports/clock.js';
import { messageOf } from '../ports/errors.js';
import type { Logger } from '../ports/logger.js';
import type { MetadataAPI } from '../ports/metadata-api.js';
import type { Random } from '../ports/random.js';
import type { InstanceMetadata } from '../ports/types.js';
import { type BackoffOptions, callWithTimeout, fullJitterDelayMs } from './backoff.js';

/**
 * `work`, or the signal's reason as soon as it aborts (the work itself goes on; the caller stops
 * waiting for it). Rejects at once when `signal` has already aborted.
 */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/** Sleeps `ms` of `clock` time; false when `signal` aborted before or meanwhile. */
export async function sleepUnlessAborted(
  clock: Pick<Clock, 'sleep'>,
  ms: number,
  signal: AbortSignal,
): Promise<boolean> {
  try {
    await clock.sleep(ms, signal);
  } catch {
    // Clock.sleep rejects only on abort.
  }
  return !signal.aborted;
}

/** What {@link waitForSelf} reads. */
export interface WaitForSelfDeps {
  metadata: Pick<MetadataAPI, 'self'>;
  clock: Clock;
  random: Pick<Random, 'float'>;
  logger: Logger;
}

/** How {@link waitForSelf} polls. */
export interface WaitForSelfOptions {
  /** Deadline of each metadata call in ms. */
  metadataTimeoutMs: number;
  /** Pause between polls: capped exponential backoff with full jitter. */
  backoff: BackoffOptions;
  /** Ends the wait. */
  signal: AbortSignal;
}

/**
 * Polls metadata until this node has a name and a known role (ControlPlane or Worker), logging each
 * miss; undefined once `signal` aborts.
 */
export async function waitForSelf(
  deps: WaitForSelfDeps,
  options: WaitForSelfOptions,
): Promise<InstanceMetadata | undefined> {
  const { metadata, clock, random, logger } = deps;
  const { signal } = options;
  for (let attempt = 0; !signal.aborted; attempt++) {
    try {
      const self = await callWithTimeout(
        clock,
        'getting own metadata',
        options.metadataTimeoutMs,
        signal,
        (o) => metadata.self(o),
      );
      if (self.name !== '' && (self.role === 'ControlPlane' || self.role === 'Worker')) return self;
      logger.warn('Metadata has no name or role for this node yet', { name: self.name, role: self.role });
    } catch (err) {
      if (signal.aborted) return undefined;
      logger.warn('Failed to get own metadata', { error: messageOf(err) });
    }
    if (!(await sleepUnlessAborted(clock, fullJitterDelayMs(attempt, options.backoff, random), signal)))
      return undefined;
  }
  return undefined;
}
