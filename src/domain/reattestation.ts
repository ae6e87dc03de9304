/**
 * Continuous re-attestation (domain), run by the node operator after joins: on an interval, every
 * joined node is asked through its verification service for an attestation document bound to a
 * fresh random nonce, and the document is verified against the attestation config in force by the
 * same validators the join service uses (the verifier port builds them). A node's result is written
 * to its EvidenceRecord, counted as a metric, raised as an Event with a reason code when it failed,
 * and, only when the operator opted in, a failed node is cordoned (spec.unschedulable); it is never
 * drained or deleted.
 *
 * Bounded: at most `concurrency` nodes are asked at once, and each has a deadline over asking and
 * verifying; a node that does not answer within it is `unreachable`, never a hang. A round that
 * cannot read the joined nodes or the config records nothing (no node is judged on missing facts).
 */
import type { Clock } from '../ports/clock.js';
import { isAttestationError, isConfbootError, messageOf } from '../ports/errors.js';
import type { Logger } from '../ports/logger.js';
import { joinHostPort } from '../ports/peer-address.js';
import type { Random } from '../ports/random.js';
import {
  isReattestationFailure,
  type NodeCordoner,
  type ReattestationEvents,
  type ReattestationFailure,
  type ReattestationMetrics,
  type ReattestationRecords,
  type ReattestationResult,
  type ReattestationTarget,
  type ReattestationTargets,
  type ReattestationVerifier,
} from '../ports/reattestation.js';
import type { CallOptions } from '../ports/types.js';
import type { Validator } from '../ports/validator.js';
import type { AttestationFetcher } from '../ports/verification.js';
import { VERIFY_SERVICE_USER_DATA } from './verification-service.js';
import { raceAbort } from './waits.js';

/** Default time between two rounds. */
export const DEFAULT_REATTEST_INTERVAL_MS = 5 * 60_000;
/** Default nodes asked at once. */
export const DEFAULT_REATTEST_CONCURRENCY = 16;
/** Default deadline of one node (asking and verifying). */
export const DEFAULT_REATTEST_DEADLINE_MS = 10_000;
/** Bytes of each fresh nonce. */
export const REATTEST_NONCE_BYTES = 32;

/** What re-attestation needs. */
export interface ReattestationDeps {
  targets: ReattestationTargets;
  verifier: ReattestationVerifier;
  fetcher: AttestationFetcher;
  records: ReattestationRecords;
  events: ReattestationEvents;
  metrics: ReattestationMetrics;
  /** Present only when the operator opted in to cordoning failed nodes. */
  cordoner?: NodeCordoner;
  clock: Pick<Clock, 'now' | 'sleep'>;
  random: Pick<Random, 'bytes'>;
  logger: Logger;
  /** The verification service's port on every node. */
  port: number;
  /** See {@link DEFAULT_REATTEST_CONCURRENCY}. */
  concurrency?: number;
  /** See {@link DEFAULT_REATTEST_DEADLINE_MS}. */
  deadlineMs?: number;
}

/** One node's line of a round's report. */
export interface NodeReattestation extends ReattestationResult {
  nodeName: string;
  /** Whether this round cordoned it. */
  cordoned: boolean;
}

/** What one round did. */
export interface ReattestationRoundReport {
  results: NodeReattestation[];
  /** Nodes whose result is a failure. */
  failing: number;
  /** Writes that failed ("doing x: cause"); the next round writes again. */
  failures: string[];
}

/** The reason code of an attestation refusal code (ports/errors.ts REFUSAL_REASON_CODES). */
function failureOf(reasonCode: string): ReattestationFailure {
  return isReattestationFailure(reasonCode) ? reasonCode : 'attestation-refused';
}

class DeadlinePassed extends Error {}

/** See the module header. */
export class Reattestation {
  readonly #deps: ReattestationDeps;
  readonly concurrency: number;
  readonly deadlineMs: number;

  constructor(deps: ReattestationDeps) {
    this.#deps = deps;
    this.concurrency = deps.concurrency ?? DEFAULT_REATTEST_CONCURRENCY;
    this.deadlineMs = deps.deadlineMs ?? DEFAULT_REATTEST_DEADLINE_MS;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1)
      throw new Error(`re-attestation: concurrency must be an integer ≥ 1, got ${this.concurrency}`);
    if (!Number.isInteger(this.deadlineMs) || this.deadlineMs < 1)
      throw new Error(`re-attestation: deadline must be an integer ≥ 1 ms, got ${this.deadlineMs}`);
  }

  /** One round over every joined node. Rejects only when the nodes or the config cannot be read. */
  async round(options: CallOptions = {}): Promise<ReattestationRoundReport> {
    const { targets, verifier } = this.#deps;
    const [nodes, validator] = await Promise.all([targets.list(options), verifier.current(options)]);
    const results: NodeReattestation[] = new Array(nodes.length);
    const failures: string[] = [];
    let next = 0;
    const worker = async () => {
      for (let i = next++; i < nodes.length; i = next++) {
        if (options.signal?.aborted) return;
        const target = nodes[i] as ReattestationTarget;
        const result = await this.#check(target, validator, options.signal);
        results[i] = await this.#report(target, result, failures, options);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.concurrency, nodes.length) }, worker));
    const done = results.filter((r) => r !== undefined);
    const failing = done.filter((r) => !r.ok).length;
    this.#deps.metrics.failing(failing);
    return { results: done, failing, failures };
  }

  /** Re-attests one node under its deadline; never rejects. */
  async #check(
    target: ReattestationTarget,
    validator: Pick<Validator, 'validate'>,
    outer: AbortSignal | undefined,
  ): Promise<ReattestationResult> {
    const { clock, random, fetcher, port } = this.#deps;
    const at = () => clock.now().toISOString();
    const fail = (reason: ReattestationFailure, detail: string): ReattestationResult => ({
      at: at(),
      ok: false,
      reason,
      detail,
    });
    if (target.address === undefined) return fail('no-address', 'the Node reports no InternalIP');
    const deadline = new AbortController();
    const stopTimer = new AbortController();
    const onOuter = () => deadline.abort(outer?.reason);
    outer?.addEventListener('abort', onOuter, { once: true });
    clock.sleep(this.deadlineMs, stopTimer.signal).then(
      () => deadline.abort(new DeadlinePassed()),
      () => {},
    );
    const endpoint = joinHostPort(target.address, port);
    const nonce = random.bytes(REATTEST_NONCE_BYTES);
    try {
      let fetched: Awaited<ReturnType<AttestationFetcher['fetch']>>;
      try {
        fetched = await raceAbort(
          fetcher.fetch(endpoint, nonce, { signal: deadline.signal, timeoutInMs: this.deadlineMs }),
          deadline.signal,
        );
      } catch (err) {
        if (err instanceof DeadlinePassed)
          return fail('unreachable', `no answer from ${endpoint} within ${this.deadlineMs} ms`);
        if (isConfbootError(err) && err.code === 'resource-exhausted') return fail('busy', messageOf(err));
        if (isConfbootError(err) && err.code === 'invalid-argument')
          return fail('bad-answer', messageOf(err));
        return fail('unreachable', messageOf(err));
      }
      let validated: Awaited<ReturnType<Validator['validate']>>;
      try {
        validated = await raceAbort(
          validator.validate(fetched.document, nonce, {
            peerAddress: fetched.peerAddress,
            signal: deadline.signal,
          }),
          deadline.signal,
        );
      } catch (err) {
        if (isAttestationError(err)) return fail(failureOf(err.reasonCode), `${err.check}: ${err.message}`);
        if (err instanceof DeadlinePassed)
          return fail('verifier-unavailable', `verifying took longer than ${this.deadlineMs} ms`);
        return fail('verifier-unavailable', messageOf(err));
      }
      if (!Buffer.from(validated.userData).equals(Buffer.from(VERIFY_SERVICE_USER_DATA)))
        return fail('user-data-mismatch', "the document does not bind the verification service's user data");
      return {
        at: at(),
        ok: true,
        reason: 'ok',
        ...(validated.measurementSet === undefined ? {} : { measurementSet: validated.measurementSet }),
      };
    } finally {
      stopTimer.abort();
      outer?.removeEventListener('abort', onOuter);
    }
  }

  /** Records, counts, reports and (on opt-in) cordons; a failed write is noted, never thrown. */
  async #report(
    target: ReattestationTarget,
    result: ReattestationResult,
    failures: string[],
    options: CallOptions,
  ): Promise<NodeReattestation> {
    const { records, events, metrics, cordoner, logger } = this.#deps;
    metrics.count(result.ok ? 'ok' : 'failed', result.reason);
    try {
      await records.record(target, result, options);
    } catch (err) {
      failures.push(`recording the re-attestation of ${target.nodeName}: ${messageOf(err)}`);
    }
    let cordoned = false;
    if (!result.ok) {
      events.failed(target, result);
      logger.warn('Re-attestation failed', {
        node: target.nodeName,
        reason: result.reason,
        detail: result.detail,
      });
      if (cordoner !== undefined && !target.unschedulable) {
        try {
          await cordoner.cordon(target.nodeName, options);
          cordoned = true;
          logger.warn('Cordoned node after a failed re-attestation', {
            node: target.nodeName,
            reason: result.reason,
          });
        } catch (err) {
          failures.push(`cordoning ${target.nodeName}: ${messageOf(err)}`);
        }
      }
    }
    return { nodeName: target.nodeName, ...result, cordoned };
  }

  /**
   * Runs a round every `intervalMs` (from the start of one round to the next) until `signal`
   * aborts; a round that cannot read the cluster or the config is logged and the next one tries again.
   */
  async run(options: {
    intervalMs: number;
    signal: AbortSignal;
    onRound?: (r: ReattestationRoundReport) => void;
  }): Promise<void> {
    const { clock, logger } = this.#deps;
    while (!options.signal.aborted) {
      const started = clock.now().getTime();
      try {
        const report = await this.round({ signal: options.signal });
        for (const f of report.failures) logger.warn('Re-attestation write failed', { failure: f });
        options.onRound?.(report);
      } catch (err) {
        if (options.signal.aborted) break;
        logger.warn('Re-attestation round could not start, trying again', { err: messageOf(err) });
      }
      const elapsed = clock.now().getTime() - started;
      try {
        await clock.sleep(Math.max(0, options.intervalMs - elapsed), options.signal);
      } catch {
        break;
      }
    }
  }
}
