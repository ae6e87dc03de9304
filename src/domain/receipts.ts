/**
 * Join receipts (join service, after a ticket was issued): the claims of the signed receipt that
 * tells anyone outside the cluster which evidence the join service accepted, under which policy, for
 * which node, bound to which attested TLS session, and when. The claims follow the EAT Attestation
 * Result (EAR) format with the Veraison EAR profile: one appraisal (`submods` entry) per evidence
 * component, each with an `ear.status` tier and an AR4SI trustworthiness vector; confboot's own
 * claims carry the `confboot.` prefix. Signing is the ReceiptSigner port's job (ES256 JWT).
 */
import { createHash } from 'node:crypto';
import {
  EAR_PROFILE,
  type EarAppraisal,
  type EarStatus,
  type ReceiptClaims,
  type ReceiptSubjectClaims,
} from '../ports/receipt-signer.js';
import type { AttestationCheck, MeasurementMismatch } from '../ports/types.js';

/** The measurement set named when the validator does not name the set that matched. */
export const DEFAULT_MEASUREMENT_SET = 'default';

/** AR4SI trustworthiness claim values confboot asserts (a subset of the AR4SI registry). */
export const TRUST_CLAIM = Object.freeze({
  /** instance-identity: the attesting environment is recognized (affirming). */
  recognizedInstance: 2,
  /** hardware: genuine, its signature chains to a trusted key (affirming). */
  genuineHardware: 2,
  /** executables: only approved executables were loaded during boot (affirming). */
  approvedBoot: 3,
  /** executables: something loaded is not recognized (warning). */
  unrecognizedRuntime: 33,
});

/** What the join service knows about one decision when it issues a ticket. */
export interface ReceiptInput {
  rpc: string;
  nodeName?: string;
  diskUuid: string;
  isControlPlane?: boolean;
  peer: string;
  variant: string;
  /** The measurement set that matched; {@link DEFAULT_MEASUREMENT_SET} when not named. */
  measurementSet?: string;
  checks: readonly AttestationCheck[];
  warnings: readonly MeasurementMismatch[];
  /** The TLS-exporter nonce the document bound (32 bytes). */
  nonce: Uint8Array;
  /** The attested user data (SHA-256 of the node's TLS SPKI). */
  userData: Uint8Array;
}

/** The verifier identity and the time of a receipt. */
export interface ReceiptContext {
  issuedAt: Date;
  /** `ear.verifier-id.build`, e.g. `confboot 0.1.0 join-service`. */
  build: string;
}

const ATLS_CHECKS: ReadonlySet<string> = new Set(['peer-certificate', 'variant-oid', 'user-data']);

/** The evidence component a check belongs to: attested TLS, the measurements, or the evidence itself. */
export function componentOf(check: string): 'attested-tls' | 'measurements' | 'evidence' {
  if (ATLS_CHECKS.has(check)) return 'attested-tls';
  if (check === 'measurements' || check.startsWith('measurement')) return 'measurements';
  return 'evidence';
}

/** The EAR tier of a trustworthiness claim value (AR4SI: 2–31 affirming, 32–95 warning, 96–127 contraindicated). */
export function tierOf(value: number): EarStatus {
  const abs = Math.abs(value);
  if (abs >= 2 && abs <= 31) return 'affirming';
  if (abs >= 32 && abs <= 95) return 'warning';
  if (abs >= 96 && abs <= 127) return 'contraindicated';
  return 'none';
}

const TIER_ORDER: readonly EarStatus[] = ['none', 'affirming', 'warning', 'contraindicated'];

/** The status of an appraisal: the worst tier among its vector's claims (`none` for an empty vector). */
export function statusOf(vector: Record<string, number>): EarStatus {
  let worst: EarStatus = 'none';
  for (const v of Object.values(vector)) {
    const t = tierOf(v);
    if (TIER_ORDER.indexOf(t) > TIER_ORDER.indexOf(worst)) worst = t;
  }
  return worst;
}

/** The measurement set a receipt names: the one that matched, else {@link DEFAULT_MEASUREMENT_SET}. */
export function measurementSetOf(input: { measurementSet?: string }): string {
  return input.measurementSet !== undefined && input.measurementSet !== ''
    ? input.measurementSet
    : DEFAULT_MEASUREMENT_SET;
}

const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

/**
 * The claims of the receipt of one issued ticket. A receipt is only made for evidence that passed,
 * so every enforced check is ok; a component with a failed check (none in practice) would be
 * contraindicated.
 */
export function buildReceiptClaims(input: ReceiptInput, ctx: ReceiptContext): ReceiptClaims {
  const measurementSet = measurementSetOf(input);
  const policyId = `confboot:attestation-config/${input.variant}/${measurementSet}`;
  const groups = new Map<string, AttestationCheck[]>();
  for (const c of input.checks) {
    const k = componentOf(c.name);
    groups.set(k, [...(groups.get(k) ?? []), c]);
  }
  const appraisal = (
    checks: readonly AttestationCheck[],
    vector: Record<string, number>,
    extra: Partial<EarAppraisal> = {},
  ): EarAppraisal => {
    const failed = checks.some((c) => !c.ok);
    const v = failed ? Object.fromEntries(Object.keys(vector).map((k) => [k, 96])) : vector;
    return {
      'ear.status': statusOf(v),
      'ear.trustworthiness-vector': v,
      'ear.appraisal-policy-id': policyId,
      'confboot.checks': checks.map((c) => ({ name: c.name, ok: c.ok })),
      ...extra,
    };
  };
  const submods: Record<string, EarAppraisal> = {
    'attested-tls': appraisal(groups.get('attested-tls') ?? [], {
      'instance-identity': TRUST_CLAIM.recognizedInstance,
    }),
    [input.variant]: appraisal(groups.get('evidence') ?? [], { hardware: TRUST_CLAIM.genuineHardware }),
    measurements: appraisal(
      groups.get('measurements') ?? [],
      {
        executables: input.warnings.length > 0 ? TRUST_CLAIM.unrecognizedRuntime : TRUST_CLAIM.approvedBoot,
      },
      input.warnings.length > 0
        ? {
            'confboot.warn-only-mismatches': input.warnings.map((w) => ({
              pcr: w.index,
              expected: hex(w.expected),
              actual: w.actual === undefined ? null : hex(w.actual),
            })),
          }
        : {},
    ),
  };
  const subject: ReceiptSubjectClaims = {
    rpc: input.rpc,
    ...(input.nodeName !== undefined ? { node: input.nodeName } : {}),
    diskUuid: input.diskUuid.toLowerCase(),
    ...(input.isControlPlane !== undefined ? { controlPlane: input.isControlPlane } : {}),
    peer: input.peer,
    variant: input.variant,
    measurementSet,
    nonceBinding: 'sha256(tls-exporter-nonce)',
    tlsSpkiSha256: hex(input.userData),
  };
  return {
    eat_profile: EAR_PROFILE,
    iat: Math.floor(ctx.issuedAt.getTime() / 1000),
    'ear.verifier-id': { developer: 'confboot', build: ctx.build },
    eat_nonce: createHash('sha256').update(input.nonce).digest('base64url'),
    submods,
    'confboot.receipt': subject,
    sub: input.nodeName ?? `disk/${input.diskUuid.toLowerCase()}`,
  };
}
