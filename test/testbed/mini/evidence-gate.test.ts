/**
 * The mini guest agent quotes for the host only for the flow's own purpose: one evidence document
 * per boot, before the bootstrapper starts, for the nonce the host committed to in its pre-boot
 * config, with user data fixed by the agent (never the host's). Gate logic with a recording issuer
 * standing in for the TPM (the real qemu-vtpm issuer on a VM's TPM runs in test/testbed/mini/mini-up.test.ts).
 */
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { EVIDENCE_USER_DATA, EvidenceGate } from '../../../src/testbed/mini/guest/evidence.js';
import { parseGuestConfig } from '../../../src/testbed/mini/guest/protocol.js';

function recordingIssuer() {
  const calls: Array<{ userData: string; nonce: string }> = [];
  return {
    calls,
    issue: async (userData: Uint8Array, nonce: Uint8Array) => {
      calls.push({
        userData: Buffer.from(userData).toString('hex'),
        nonce: Buffer.from(nonce).toString('hex'),
      });
      return new Uint8Array([1]);
    },
  };
}

describe('mini guest agent: evidence quote gate', () => {
  it('quotes once, for the committed nonce, with the fixed user data', async () => {
    const nonce = randomBytes(32);
    const gate = new EvidenceGate(nonce.toString('hex'));
    const issuer = recordingIssuer();
    await gate.issue(issuer, nonce);
    expect(issuer.calls).toEqual([
      {
        userData: createHash('sha256').update('confboot-mini boot evidence v1').digest('hex'),
        nonce: nonce.toString('hex'),
      },
    ]);
    expect(Buffer.from(EVIDENCE_USER_DATA).toString('hex')).toBe(issuer.calls[0]?.userData);
  });

  it('refuses a second quote, another nonce, and any quote once the bootstrapper starts', async () => {
    const nonce = randomBytes(32);
    const issuer = recordingIssuer();
    const other = new EvidenceGate(nonce.toString('hex'));
    await expect(other.issue(issuer, randomBytes(32))).rejects.toThrow(/not the one the host committed to/);
    await other.issue(issuer, nonce);
    await expect(other.issue(issuer, nonce)).rejects.toThrow(/already gave its one evidence quote/);
    const closed = new EvidenceGate(nonce.toString('hex'));
    closed.close();
    await expect(closed.issue(issuer, nonce)).rejects.toThrow(/only before the bootstrapper starts/);
    expect(issuer.calls).toHaveLength(1);
  });

  it('takes only a 32-byte nonce', () => {
    for (const bad of ['', '00', '0'.repeat(62), 'g'.repeat(64), '0'.repeat(66), 'AB'.repeat(32)])
      expect(() => new EvidenceGate(bad)).toThrow(/32 bytes/);
  });

  it('the host config cannot choose the user data or add fields', () => {
    const nonce = randomBytes(32).toString('hex');
    expect(parseGuestConfig(JSON.stringify({ step: 'attest', nonce }))).toEqual({ step: 'attest', nonce });
    expect(() =>
      parseGuestConfig(JSON.stringify({ step: 'attest', nonce, userData: 'aa'.repeat(32) })),
    ).toThrow(/unknown fields: userData/);
    expect(() =>
      parseGuestConfig(
        JSON.stringify({
          step: 'bootstrap',
          role: 'worker',
          metadataUrl: 'http://10.42.0.1:8080',
          stateDisk: '/dev/vda',
          evidenceNonce: nonce,
          quote: { userData: 'aa' },
        }),
      ),
    ).toThrow(/unknown fields: quote/);
    expect(() => parseGuestConfig(JSON.stringify({ step: 'attest', nonce: '00' }))).toThrow(/32 bytes/);
    expect(() => parseGuestConfig(JSON.stringify({ step: 'quote', nonce }))).toThrow(/unknown step/);
  });
});
