/**
 * Join service: the request path between the attested gRPC edge and the domain's TicketIssuer.
 * For every join or rejoin request, in this order and before any key-service call: the caller's
 * per-IP rate limit (ResourceExhausted at once), the size of every request field (InvalidArgument,
 * before anything is parsed) and room in the byte budget of requests held (ResourceExhausted at
 * once), a slot under the global concurrency cap (waited
 * for briefly in FIFO order; ResourceExhausted when the queue is full or the wait runs out). Then the
 * TicketIssuer decides (it parses the kubelet CSR once, checks the deny list and everything else,
 * and reports the node name for the audit event). Every request ends in exactly one audit event and one counted outcome; neither ever
 * holds a key, token or secret (tickets are never logged, only the caller, node and outcome).
 */

import {
  type ConcurrencyLimiter,
  rateLimitedError,
  type TokenBucketRateLimiter,
} from '../../adapters/ops/limits.js';
import type { JoinOutcome, JoinRpc, JoinServiceMetrics } from '../../adapters/ops/metrics.js';
import { buildReceiptClaims } from '../../domain/receipts.js';
import { checkRequestSizes, type TicketContext } from '../../domain/ticket-issuer.js';
import type { Clock } from '../../ports/clock.js';
import { ConfbootError, isAttestationError, isConfbootError } from '../../ports/errors.js';
import type { EvidenceStore } from '../../ports/evidence-store.js';
import type { Logger } from '../../ports/logger.js';
import { peerHost } from '../../ports/peer-address.js';
import type { ReceiptSigner } from '../../ports/receipt-signer.js';
import type {
  AttestationCheck,
  JoinTicket,
  JoinTicketRequest,
  MeasurementMismatch,
  RejoinTicket,
  RejoinTicketRequest,
} from '../../ports/types.js';
import type { ByteBudget } from './memory.js';

/** The message of every audit event. */
export const AUDIT_MESSAGE = 'Join audit';
/** The `event` field of every audit event. */
export const AUDIT_EVENT = 'join-audit';

/** One audit event (logged as fields of {@link AUDIT_MESSAGE}). */
export interface JoinAuditEvent {
  event: typeof AUDIT_EVENT;
  rpc: JoinRpc;
  /** Caller address `ip:port`. */
  peer: string;
  /** Attested variant, or `unknown` when the connection was refused before attestation passed. */
  variant: string;
  /** The measurement set the caller's attestation matched, when the attestation config names sets. */
  measurementSet?: string;
  /** Node name from the kubelet CSR (normalised), when the request has a parsable one. */
  nodeName?: string;
  /** State disk UUID as requested (an identifier, not a secret). */
  diskUuid?: string;
  isControlPlane?: boolean;
  outcome: JoinOutcome;
  /** Error kind of a refusal (`permission-denied`, `resource-exhausted`, …). */
  code?: string;
  /** Short stable reason: `ok`, `rate-limited`, `overloaded`, `deny-list`, `disk-bound`, the error kind or the failed attestation check. */
  reason: string;
  /** Stable reason code of an attestation refusal (docs/attestation-config.md), e.g. `measurement-mismatch`. */
  reasonCode?: string;
  /** Human-readable detail of a refusal; confboot error messages carry no secrets by contract. */
  detail?: string;
  /** The signed receipt of an issued ticket (a JWT; not a secret). */
  receipt?: string;
  /**
   * A measurement refusal's mismatches, expected and actual values in hex (`actual` null when the
   * document lacks the register). The peer is told the registers only; the values stay here.
   */
  mismatches?: AuditMismatch[];
  durationMs: number;
}

/** One measurement mismatch in an audit event. */
export interface AuditMismatch {
  index: number;
  expected: string;
  actual: string | null;
  warnOnly: boolean;
}

/** The audit form of an attestation refusal's mismatches; undefined when it has none. */
export function auditMismatches(err: unknown): AuditMismatch[] | undefined {
  if (!isAttestationError(err) || err.mismatches.length === 0) return undefined;
  const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');
  return err.mismatches.map((m) => ({
    index: m.index,
    expected: hex(m.expected),
    actual: m.actual === undefined ? null : hex(m.actual),
    warnOnly: m.warnOnly,
  }));
}

/** The part of the TicketIssuer the handler calls. */
export interface TicketIssuing {
  /** See TicketIssuer.issueJoinTicket. */
  issueJoinTicket(req: JoinTicketRequest, ctx: TicketContext): Promise<JoinTicket>;
  /** See TicketIssuer.issueRejoinTicket. */
  issueRejoinTicket(req: RejoinTicketRequest, ctx: { peer: string }): Promise<RejoinTicket>;
}

/** What the gRPC edge tells the handler about its caller. */
export interface CallerContext {
  /** Caller address `ip:port`. */
  peer: string;
  /** The attested variant. */
  variant: string;
  /** Aborts when the call is cancelled (caller gone or service shutting down). */
  signal?: AbortSignal;
  /** What attested TLS verified on the caller's connection (the receipt is made from it). */
  attestation?: CallerAttestation;
}

/** The verified evidence of a caller's connection. */
export interface CallerAttestation {
  checks: readonly AttestationCheck[];
  warnings: readonly MeasurementMismatch[];
  /** SHA-256 of the caller's TLS SPKI, as attested. */
  userData: Uint8Array;
  /** The TLS-exporter nonce the document bound. */
  nonce: Uint8Array;
  /** The measurement set that matched, when the validator names one. */
  measurementSet?: string;
  /** The attestation document as received and its variant OID (kept for dry runs). */
  document?: Uint8Array;
  oid?: string;
}

/** How the handler signs receipts of issued tickets. */
export interface ReceiptIssuing {
  signer: ReceiptSigner;
  clock: Clock;
  /** `ear.verifier-id.build`, e.g. `confboot 0.1.0 join-service`. */
  build: string;
}

/** Dependencies of {@link GuardedJoinHandler}. */
export interface GuardedJoinHandlerDeps {
  issuer: TicketIssuing;
  rateLimiter: TokenBucketRateLimiter;
  concurrency: ConcurrencyLimiter;
  /** Bytes of request fields held at once (running or waiting for a slot); default unbounded. */
  requestBytes?: ByteBudget;
  metrics: JoinServiceMetrics;
  /** Receives the audit events. */
  audit: Logger;
  /** Signs a receipt for every issued ticket; without it tickets carry none. */
  receipts?: ReceiptIssuing;
  /** Keeps the evidence behind every ticket the issuer decided on (issued or refused). */
  evidence?: { store: EvidenceStore; clock: Clock };
}

/** A refusal decided by the handler itself: the cause's kind, with its audit and metric reason. */
function refusal(reason: string, cause: ConfbootError): ConfbootError {
  return new ConfbootError(cause.code, cause.message, { recoverable: cause.recoverable, reason });
}

/** The audit fields of a refusal: the error's own reason, else the failed check or the error kind. */
function auditReasonOf(err: unknown): { code: string; reason: string; detail: string } {
  if (isAttestationError(err)) return { code: err.code, reason: err.check, detail: err.message };
  if (isConfbootError(err)) return { code: err.code, reason: err.reason ?? err.code, detail: err.message };
  return { code: 'internal', reason: 'internal', detail: 'internal error' };
}

/** Emits one audit event at info (issued) or warn (refused). */
export function emitAudit(audit: Logger, event: JoinAuditEvent): void {
  const fields = { ...event } as Record<string, unknown>;
  if (event.outcome === 'issued') audit.info(AUDIT_MESSAGE, fields);
  else audit.warn(AUDIT_MESSAGE, fields);
}

/** The join service's request path: limits, deny list, ticket issuer, audit and metrics. */
export class GuardedJoinHandler {
  constructor(private readonly deps: GuardedJoinHandlerDeps) {}

  /** Issues a join ticket unless a limit refuses the caller first. */
  issueJoinTicket(request: JoinTicketRequest, ctx: CallerContext): Promise<JoinTicket> {
    const event: Partial<JoinAuditEvent> = {
      diskUuid: request.diskUuid,
      isControlPlane: request.isControlPlane,
    };
    return this.guard('IssueJoinTicket', ctx, event, request, async () =>
      this.withReceipt(
        'IssueJoinTicket',
        ctx,
        event,
        await this.deps.issuer.issueJoinTicket(request, {
          peer: ctx.peer,
          ...(ctx.signal ? { signal: ctx.signal } : {}),
          onNodeName: (nodeName) => {
            event.nodeName = nodeName;
          },
        }),
      ),
    );
  }

  /**
   * Issues a rejoin ticket unless a limit refuses the caller first. A rejoin carries only the disk
   * UUID, so revoking a node's rejoin needs its disk UUID on the deny list (the audit event of its
   * join names both).
   */
  issueRejoinTicket(request: RejoinTicketRequest, ctx: CallerContext): Promise<RejoinTicket> {
    const event: Partial<JoinAuditEvent> = { diskUuid: request.diskUuid };
    return this.guard('IssueRejoinTicket', ctx, event, request, async () =>
      this.withReceipt(
        'IssueRejoinTicket',
        ctx,
        event,
        await this.deps.issuer.issueRejoinTicket(request, { peer: ctx.peer }),
      ),
    );
  }

  /** Records the evidence a decision of the issuer was made on (nothing without a store or document). */
  private async recordEvidence(
    rpc: JoinRpc,
    ctx: CallerContext,
    event: Partial<JoinAuditEvent>,
    outcome: 'issued' | 'refused',
    reason: string,
  ): Promise<void> {
    const evidence = this.deps.evidence;
    const a = ctx.attestation;
    if (evidence === undefined || a?.document === undefined || event.diskUuid === undefined) return;
    await evidence.store.record({
      key: `disk/${event.diskUuid.toLowerCase()}`,
      ...(event.nodeName !== undefined ? { nodeName: event.nodeName } : {}),
      peer: ctx.peer,
      variant: ctx.variant,
      oid: a.oid ?? '',
      document: a.document,
      nonce: a.nonce,
      userData: a.userData,
      rpc,
      outcome,
      reason,
      at: evidence.clock.now().toISOString(),
    });
  }

  /**
   * Signs the receipt of an issued ticket and attaches it to the ticket and the audit event. A
   * receipt that cannot be signed fails the call (nothing is handed out without its receipt).
   */
  private async withReceipt<T extends JoinTicket | RejoinTicket>(
    rpc: JoinRpc,
    ctx: CallerContext,
    event: Partial<JoinAuditEvent>,
    ticket: T,
  ): Promise<T> {
    const receipts = this.deps.receipts;
    if (receipts === undefined || ctx.attestation === undefined) return ticket;
    const a = ctx.attestation;
    const claims = buildReceiptClaims(
      {
        rpc,
        ...(event.nodeName !== undefined ? { nodeName: event.nodeName } : {}),
        diskUuid: event.diskUuid ?? '',
        ...(event.isControlPlane !== undefined ? { isControlPlane: event.isControlPlane } : {}),
        peer: ctx.peer,
        variant: ctx.variant,
        ...(a.measurementSet !== undefined ? { measurementSet: a.measurementSet } : {}),
        checks: a.checks,
        warnings: a.warnings,
        nonce: a.nonce,
        userData: a.userData,
      },
      { issuedAt: receipts.clock.now(), build: receipts.build },
    );
    let receipt: string;
    try {
      receipt = await receipts.signer.sign(claims);
    } catch (err) {
      throw new ConfbootError('internal', 'signing the join receipt failed', {
        cause: err,
        reason: 'receipt',
      });
    }
    event.receipt = receipt;
    return { ...ticket, receipt };
  }

  private async guard<T>(
    rpc: JoinRpc,
    ctx: CallerContext,
    event: Partial<JoinAuditEvent>,
    request: Partial<JoinTicketRequest> & { diskUuid: string },
    body: () => Promise<T>,
  ): Promise<T> {
    const { metrics, rateLimiter, concurrency } = this.deps;
    const started = process.hrtime.bigint();
    const finish = (outcome: JoinOutcome, err?: unknown) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      const r = err === undefined ? { reason: 'ok' } : auditReasonOf(err);
      metrics.countRequest({ rpc, outcome, variant: ctx.variant, reason: r.reason });
      metrics.requestSeconds.observe({ rpc, outcome }, seconds);
      emitAudit(this.deps.audit, {
        event: AUDIT_EVENT,
        rpc,
        peer: ctx.peer,
        variant: ctx.variant,
        ...(ctx.attestation?.measurementSet === undefined
          ? {}
          : { measurementSet: ctx.attestation.measurementSet }),
        ...event,
        outcome,
        ...r,
        durationMs: Math.round(seconds * 1e6) / 1e3,
      });
    };

    const source = peerHost(ctx.peer);
    if (!rateLimiter.tryTake(source)) {
      const err = refusal('rate-limited', rateLimitedError(source, rateLimiter.retryAfterSeconds(source)));
      finish('refused', err);
      throw err;
    }
    // Field sizes before anything is parsed; then the request's bytes must fit the budget.
    try {
      checkRequestSizes(request);
    } catch (cause) {
      // Over-long fields are not echoed into the audit event.
      if (request.diskUuid.length > 64) event.diskUuid = `${request.diskUuid.slice(0, 64)}…`;
      const err = refusal('field-size', cause as ConfbootError);
      finish('refused', err);
      throw err;
    }
    const size =
      request.diskUuid.length +
      (request.certificateRequest?.length ?? 0) +
      (request.hostPublicKey?.length ?? 0) +
      (request.hostCertificatePrincipals ?? []).reduce((n, p) => n + p.length, 0);
    const releaseBytes =
      this.deps.requestBytes === undefined ? () => {} : this.deps.requestBytes.tryAcquire(size);
    if (releaseBytes === undefined) {
      const err = refusal(
        'memory-budget',
        new ConfbootError(
          'resource-exhausted',
          `the join service holds as many request bytes as its memory budget allows (${this.deps.requestBytes?.limit} bytes); retry later`,
        ),
      );
      finish('refused', err);
      throw err;
    }
    let release: () => void;
    try {
      release = await concurrency.acquire(ctx.signal);
    } catch (cause) {
      releaseBytes();
      const c = cause as ConfbootError;
      const err = refusal(c.code === 'unavailable' ? 'cancelled' : 'overloaded', c);
      finish('refused', err);
      throw err;
    }
    metrics.inFlight.inc();
    try {
      const result = await body();
      finish('issued');
      await this.recordEvidence(rpc, ctx, event, 'issued', 'ok');
      return result;
    } catch (err) {
      finish('refused', err);
      await this.recordEvidence(rpc, ctx, event, 'refused', auditReasonOf(err).reason);
      throw err;
    } finally {
      metrics.inFlight.dec();
      release();
      releaseBytes();
    }
  }
}
