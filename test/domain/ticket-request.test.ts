/**
 * The dependency-free checks of a ticket request: field sizes (refusal reason request-too-large),
 * the disk UUID and the kubelet CSR subject (malformed-request), and the CSR's IP addresses against
 * the caller's (caller-mismatch). Each refusal is invalid-argument and says what to fix.
 */
import { describe, expect, it } from 'vitest';
import {
  checkDiskUuid,
  checkIps,
  checkKubeletCsr,
  checkRequestSizes,
  maxTicketRequestBytes,
  REQUEST_FIELD_LIMITS,
} from '../../src/domain/ticket-request.js';
import type { CsrInfo } from '../../src/ports/certificate-authority.js';
import { type ConfbootError, isConfbootError } from '../../src/ports/errors.js';

function thrown(fn: () => unknown): ConfbootError {
  try {
    fn();
  } catch (err) {
    if (isConfbootError(err)) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

const UUID = '9c1d5cb2-3f5e-4a8a-b6c9-0e0a6f1d2c3b';

function csr(overrides: Partial<CsrInfo> = {}): CsrInfo {
  return {
    subject: [[{ type: 'O', value: 'system:nodes' }], [{ type: 'CN', value: 'system:node:Worker_1' }]],
    commonName: 'system:node:Worker_1',
    organizations: ['system:nodes'],
    ipAddresses: ['10.0.0.7'],
    dnsNames: [],
    signatureValid: true,
    publicKeySha256: 'a'.repeat(64),
    ...overrides,
  };
}

describe('checkRequestSizes', () => {
  it('accepts every field at its limit', () => {
    const l = REQUEST_FIELD_LIMITS;
    expect(() =>
      checkRequestSizes({
        diskUuid: 'u'.repeat(l.diskUuidChars),
        certificateRequest: new Uint8Array(l.certificateRequestBytes),
        hostPublicKey: new Uint8Array(l.hostPublicKeyBytes),
        hostCertificatePrincipals: Array.from({ length: l.hostCertificatePrincipals }, () =>
          'p'.repeat(l.hostCertificatePrincipalChars),
        ),
      }),
    ).not.toThrow();
  });

  it.each([
    ['disk UUID', { diskUuid: 'u'.repeat(65) }, 'disk UUID has 65 characters, more than the limit of 64'],
    [
      'CSR',
      { diskUuid: UUID, certificateRequest: new Uint8Array(16 * 1024 + 1) },
      'certificate signing request has 16385 bytes, more than the limit of 16384',
    ],
    [
      'host key',
      { diskUuid: UUID, hostPublicKey: new Uint8Array(1025) },
      'host public key has 1025 bytes, more than the limit of 1024',
    ],
    [
      'principal count',
      { diskUuid: UUID, hostCertificatePrincipals: Array.from({ length: 17 }, () => 'a') },
      'host certificate principals has 17 entries, more than the limit of 16',
    ],
    [
      'principal length',
      { diskUuid: UUID, hostCertificatePrincipals: ['ok', 'x'.repeat(254)] },
      'a host certificate principal has 254 characters, more than the limit of 253',
    ],
  ])('refuses a request over the %s limit as request-too-large', (_n, req, message) => {
    const err = thrown(() => checkRequestSizes(req));
    expect([err.code, err.reason, err.recoverable, err.message]).toEqual([
      'invalid-argument',
      'request-too-large',
      false,
      message,
    ]);
  });

  it('sets the gRPC receive limit above the largest request the field limits allow, in whole KiB', () => {
    const max = maxTicketRequestBytes();
    expect(max % 1024).toBe(0);
    expect(max).toBeGreaterThan(16 * 1024 + 4 * 64 + 1024 + 16 * 4 * 253);
    expect(max).toBeLessThan(64 * 1024);
  });
});

describe('checkDiskUuid', () => {
  it('accepts a UUID in either case', () => {
    expect(() => checkDiskUuid(UUID)).not.toThrow();
    expect(() => checkDiskUuid(UUID.toUpperCase())).not.toThrow();
  });

  it.each([
    ['', 'disk UUID is empty'],
    ['not-a-uuid', 'disk UUID "not-a-uuid" is not a UUID'],
    [`${UUID}0`, `disk UUID "${UUID}0" is not a UUID`],
    [UUID.replaceAll('-', ''), `disk UUID "${UUID.replaceAll('-', '')}" is not a UUID`],
  ])('refuses %j as malformed-request', (uuid, message) => {
    const err = thrown(() => checkDiskUuid(uuid));
    expect([err.code, err.reason, err.message]).toEqual(['invalid-argument', 'malformed-request', message]);
  });
});

describe('checkKubeletCsr', () => {
  it('returns the normalised node name of a well-formed CSR', () => {
    expect(checkKubeletCsr(csr())).toBe('worker-1');
  });

  it.each([
    ['a bad signature', csr({ signatureValid: false }), 'kubelet CSR: signature does not verify'],
    [
      'DNS names',
      csr({ dnsNames: ['evil.example'] }),
      'kubelet CSR: DNS names are not allowed (IP addresses only)',
    ],
    [
      'CN before O',
      csr({ subject: [[{ type: 'CN', value: 'system:node:a' }], [{ type: 'O', value: 'system:nodes' }]] }),
      'kubelet CSR: subject must be O=system:nodes followed by CN=system:node:<name>',
    ],
    [
      'another organization',
      csr({ subject: [[{ type: 'O', value: 'system:masters' }], [{ type: 'CN', value: 'system:node:a' }]] }),
      'kubelet CSR: organization must be exactly ["system:nodes"]',
    ],
    [
      'a node name that is not RFC 1123',
      csr({ subject: [[{ type: 'O', value: 'system:nodes' }], [{ type: 'CN', value: 'system:node:a/b' }]] }),
      'kubelet CSR: node name "a/b" is not a valid RFC 1123 name',
    ],
  ])('refuses %s as malformed-request', (_n, info, message) => {
    const err = thrown(() => checkKubeletCsr(info));
    expect([err.code, err.reason]).toEqual(['invalid-argument', 'malformed-request']);
    expect(err.message.startsWith(message)).toBe(true);
  });
});

describe('checkIps', () => {
  it('returns the requested addresses canonical and once each when all are allowed', () => {
    expect(
      checkIps('join', ['10.0.0.7', '::ffff:10.0.0.7', 'fd00::0:1'], ['10.0.0.7', 'fd00::1'], 'the caller'),
    ).toEqual(['10.0.0.7', 'fd00:0:0:0:0:0:0:1']);
    expect(checkIps('join', [], [], 'the caller')).toEqual([]);
  });

  it('names every address not allowed, and the allowed set, as caller-mismatch', () => {
    const err = thrown(() => checkIps('join', ['10.0.0.7', '10.0.0.8', 'bogus'], ['10.0.0.7'], 'the caller'));
    expect([err.code, err.reason, err.recoverable, err.message]).toEqual([
      'invalid-argument',
      'caller-mismatch',
      false,
      'join: checking CSR: kubelet CSR: IP addresses 10.0.0.8, bogus are not addresses of the caller (allowed: 10.0.0.7)',
    ]);
    expect(thrown(() => checkIps('join', ['10.0.0.7'], [], 'the caller')).message).toContain(
      '(allowed: none)',
    );
  });
});
