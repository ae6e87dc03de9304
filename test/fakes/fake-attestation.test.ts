/** The reference fake runs the attestation contract first (in memory, no TPM and no CPU features). */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { describeAttestationContract, flipByteAt } from '../contract/attestation.js';
import { FakeAttestation } from './fake-attestation.js';

describeAttestationContract('FakeAttestation (in-memory reference)', async () => {
  const platform = new FakeAttestation();
  return {
    subject: { issuer: platform.issuer(), validator: platform.validator() },
    seed: {
      // The MAC and every user data byte are covered; a truncated document is malformed.
      tamper: (doc) => [
        { what: 'MAC byte 0', document: flipByteAt(doc, 0) },
        { what: 'last MAC byte', document: flipByteAt(doc, 31) },
        { what: 'user data byte 0', document: flipByteAt(doc, 32) },
        { what: 'last user data byte', document: flipByteAt(doc, doc.length - 1) },
        { what: 'MAC only (user data cut off)', document: doc.subarray(0, 32) },
        { what: 'truncated MAC', document: doc.subarray(0, 31) },
      ],
      foreignValidator: new FakeAttestation().validator(),
    },
    cleanup: async () => {},
    supports: { concurrentValidation: true },
  };
});

describe('FakeAttestation', () => {
  it("keeps a copy of its key: changing the caller's array changes no verdict", async () => {
    const key = randomBytes(32);
    const platform = new FakeAttestation(key);
    key.fill(0);
    const nonce = randomBytes(32);
    const doc = await platform.issuer().issue(Buffer.from('hi'), nonce);
    expect(Buffer.from((await platform.validator().validate(doc, nonce)).userData).toString()).toBe('hi');
    await expect(new FakeAttestation(key).validator().validate(doc, nonce)).rejects.toThrow(
      /MAC does not verify/,
    );
  });

  it('refuses a document shorter than a MAC as malformed', async () => {
    await expect(
      new FakeAttestation().validator().validate(new Uint8Array(5), new Uint8Array(32)),
    ).rejects.toThrow(/5 bytes/);
  });
});
