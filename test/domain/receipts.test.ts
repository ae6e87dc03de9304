/**
 * The claims of a join receipt (EAR format, Veraison EAR profile): checks grouped into the attested
 * TLS, evidence and measurements appraisals, AR4SI tiers and the worst-tier status, warn-only
 * mismatches turning the executables claim into a warning, the nonce bound as its SHA-256, and a
 * failed check making its component contraindicated.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  buildReceiptClaims,
  componentOf,
  DEFAULT_MEASUREMENT_SET,
  measurementSetOf,
  type ReceiptInput,
  statusOf,
  TRUST_CLAIM,
  tierOf,
} from '../../src/domain/receipts.js';

const NONCE = new Uint8Array(32).fill(7);

function input(overrides: Partial<ReceiptInput> = {}): ReceiptInput {
  return {
    rpc: 'IssueJoinTicket',
    nodeName: 'worker-1',
    diskUuid: 'ABCDEF00-0000-4000-8000-000000000001',
    isControlPlane: false,
    peer: '10.0.0.7:41234',
    variant: 'qemu-vtpm',
    checks: [
      { name: 'peer-certificate', ok: true },
      { name: 'user-data', ok: true },
      { name: 'quote-signature', ok: true },
      { name: 'measurements', ok: true },
    ],
    warnings: [],
    nonce: NONCE,
    userData: new Uint8Array([0xde, 0xad]),
    ...overrides,
  };
}
const CTX = { issuedAt: new Date('2026-12-07T10:00:00.900Z'), build: 'confboot 0.1.0 join-service' };

describe('tiers and status (AR4SI)', () => {
  it.each([
    [0, 'none'],
    [1, 'none'],
    [2, 'affirming'],
    [31, 'affirming'],
    [-3, 'affirming'],
    [32, 'warning'],
    [95, 'warning'],
    [96, 'contraindicated'],
    [127, 'contraindicated'],
    [128, 'none'],
  ] as const)('claim value %i is %s', (value, tier) => {
    expect(tierOf(value)).toBe(tier);
  });

  it('takes the worst tier of a vector, none for an empty one', () => {
    expect(statusOf({})).toBe('none');
    expect(statusOf({ a: 2, b: 33 })).toBe('warning');
    expect(statusOf({ a: 96, b: 2, c: 33 })).toBe('contraindicated');
  });
});

describe('componentOf and measurementSetOf', () => {
  it.each([
    ['peer-certificate', 'attested-tls'],
    ['variant-oid', 'attested-tls'],
    ['user-data', 'attested-tls'],
    ['measurements', 'measurements'],
    ['measurement-set-expired', 'measurements'],
    ['quote-signature', 'evidence'],
  ] as const)('%s belongs to %s', (check, component) => {
    expect(componentOf(check)).toBe(component);
  });

  it('names the matched set, else the default', () => {
    expect(measurementSetOf({ measurementSet: 'v1.2' })).toBe('v1.2');
    expect(measurementSetOf({ measurementSet: '' })).toBe(DEFAULT_MEASUREMENT_SET);
    expect(measurementSetOf({})).toBe('default');
  });
});

describe('buildReceiptClaims', () => {
  it('builds the EAR claims of an issued ticket', () => {
    const claims = buildReceiptClaims(input(), CTX);
    expect(claims.eat_profile).toBe('tag:github.com,2023:veraison/ear');
    expect(claims.iat).toBe(Math.floor(CTX.issuedAt.getTime() / 1000));
    expect(claims['ear.verifier-id']).toEqual({
      developer: 'confboot',
      build: 'confboot 0.1.0 join-service',
    });
    expect(claims.eat_nonce).toBe(createHash('sha256').update(NONCE).digest('base64url'));
    expect(claims.sub).toBe('worker-1');
    expect(claims['confboot.receipt']).toEqual({
      rpc: 'IssueJoinTicket',
      node: 'worker-1',
      diskUuid: 'abcdef00-0000-4000-8000-000000000001',
      controlPlane: false,
      peer: '10.0.0.7:41234',
      variant: 'qemu-vtpm',
      measurementSet: 'default',
      nonceBinding: 'sha256(tls-exporter-nonce)',
      tlsSpkiSha256: 'dead',
    });
    const policy = 'confboot:attestation-config/qemu-vtpm/default';
    expect(claims.submods).toEqual({
      'attested-tls': {
        'ear.status': 'affirming',
        'ear.trustworthiness-vector': { 'instance-identity': TRUST_CLAIM.recognizedInstance },
        'ear.appraisal-policy-id': policy,
        'confboot.checks': [
          { name: 'peer-certificate', ok: true },
          { name: 'user-data', ok: true },
        ],
      },
      'qemu-vtpm': {
        'ear.status': 'affirming',
        'ear.trustworthiness-vector': { hardware: 2 },
        'ear.appraisal-policy-id': policy,
        'confboot.checks': [{ name: 'quote-signature', ok: true }],
      },
      measurements: {
        'ear.status': 'affirming',
        'ear.trustworthiness-vector': { executables: 3 },
        'ear.appraisal-policy-id': policy,
        'confboot.checks': [{ name: 'measurements', ok: true }],
      },
    });
  });

  it('turns warn-only mismatches into a warning with the registers listed', () => {
    const claims = buildReceiptClaims(
      input({
        measurementSet: 'image-v2',
        warnings: [
          { index: 12, expected: new Uint8Array([1]), actual: new Uint8Array([2]), warnOnly: true },
          { index: 13, expected: new Uint8Array([3]), actual: undefined, warnOnly: true },
        ],
      }),
      CTX,
    );
    expect(claims.submods.measurements).toMatchObject({
      'ear.status': 'warning',
      'ear.trustworthiness-vector': { executables: TRUST_CLAIM.unrecognizedRuntime },
      'ear.appraisal-policy-id': 'confboot:attestation-config/qemu-vtpm/image-v2',
      'confboot.warn-only-mismatches': [
        { pcr: 12, expected: '01', actual: '02' },
        { pcr: 13, expected: '03', actual: null },
      ],
    });
  });

  it('makes a component with a failed check contraindicated, and leaves the others alone', () => {
    const checks = [
      { name: 'quote-signature', ok: false },
      { name: 'measurements', ok: true },
    ];
    const claims = buildReceiptClaims(input({ checks }), CTX);
    expect(claims.submods['qemu-vtpm']?.['ear.status']).toBe('contraindicated');
    expect(claims.submods['qemu-vtpm']?.['ear.trustworthiness-vector']).toEqual({ hardware: 96 });
    expect(claims.submods.measurements?.['ear.status']).toBe('affirming');
  });

  it('names the disk as subject when there is no node name, and leaves out what is unknown', () => {
    const { nodeName: _n, isControlPlane: _c, ...rest } = input();
    const claims = buildReceiptClaims(rest, CTX);
    expect(claims.sub).toBe('disk/abcdef00-0000-4000-8000-000000000001');
    expect(claims['confboot.receipt']).not.toHaveProperty('node');
    expect(claims['confboot.receipt']).not.toHaveProperty('controlPlane');
  });
});
