/**
 * The joining node's check of a join ticket before the node lock: each empty field is named (never
 * its value) as a recoverable invalid-argument, and a control plane's files must be the expected
 * names, each once; a worker's files are not looked at.
 */
import { describe, expect, it } from 'vitest';
import { checkJoinTicket } from '../../src/domain/join-ticket-check.js';
import { type ConfbootError, isConfbootError } from '../../src/ports/errors.js';
import type { JoinTicket } from '../../src/ports/types.js';
import { sampleTicket } from '../adapters/grpc/helpers.js';

function refusal(ticket: JoinTicket, isControlPlane: boolean): ConfbootError | undefined {
  try {
    checkJoinTicket(ticket, isControlPlane);
    return undefined;
  } catch (err) {
    if (!isConfbootError(err)) throw err;
    return err;
  }
}

describe('checkJoinTicket', () => {
  it('accepts a complete ticket for a worker and for a control plane', () => {
    expect(refusal(sampleTicket(), false)).toBeUndefined();
    expect(refusal(sampleTicket(), true)).toBeUndefined();
  });

  it.each([
    ['state disk key', { stateDiskKey: new Uint8Array(0) }],
    ['measurement secret', { measurementSecret: new Uint8Array(0) }],
    ['measurement salt', { measurementSalt: new Uint8Array(0) }],
    ['kubelet certificate', { kubeletCert: new Uint8Array(0) }],
    ['API server endpoint', { apiServerEndpoint: '' }],
    ['bootstrap token', { token: '' }],
    ['discovery token CA cert hash', { discoveryTokenCaCertHash: '' }],
  ] as const)('refuses a ticket whose %s is empty', (field, change) => {
    const err = refusal({ ...sampleTicket(), ...change }, false);
    expect([err?.code, err?.recoverable, err?.message]).toEqual([
      'invalid-argument',
      true,
      `checking join ticket: ${field} is empty`,
    ]);
  });

  it('refuses a control-plane file with a name outside the expected set, naming the file', () => {
    const ticket = {
      ...sampleTicket(),
      controlPlaneFiles: [{ name: '../../etc/shadow', data: new Uint8Array(1) }],
    };
    expect(refusal(ticket, true)?.message).toBe(
      'checking join ticket: unexpected control-plane file name "../../etc/shadow"',
    );
    expect(refusal(ticket, false)).toBeUndefined();
  });

  it('refuses a control-plane file that appears twice', () => {
    const file = { name: 'ca.key', data: new Uint8Array(1) };
    const err = refusal({ ...sampleTicket(), controlPlaneFiles: [file, { ...file }] }, true);
    expect([err?.code, err?.message]).toEqual([
      'invalid-argument',
      'checking join ticket: control-plane file "ca.key" appears twice',
    ]);
  });
});
