/**
 * FakeAttestation: an in-memory Issuer and Validator pair with real behaviour, the reference the
 * attestation contract runs first. It stands for a platform whose hardware key is an HMAC key: the
 * document is `MAC ‖ userData`, the MAC being HMAC-SHA256(key, len(userData) ‖ userData ‖ nonce),
 * so the validator refuses a changed byte, another nonce and another key, and returns exactly the
 * user data the issuer bound. It proves nothing about a machine (anyone holding the key can issue),
 * so it carries the test-only `dummy` variant and is never wired into production.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { variantOid } from '../../src/app/registry/index.js';
import { AttestationError } from '../../src/ports/errors.js';
import type { Issuer } from '../../src/ports/issuer.js';
import type { ValidationResult, Validator } from '../../src/ports/validator.js';

const MAC_SIZE = 32;

function mac(key: Uint8Array, userData: Uint8Array, nonce: Uint8Array): Buffer {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(userData.length);
  return createHmac('sha256', key).update(length).update(userData).update(nonce).digest();
}

/** One fake platform: its issuer and the validator that trusts its key. */
export class FakeAttestation {
  readonly variant = 'dummy' as const;
  readonly oid = variantOid('dummy');
  /** The platform's key; a validator of another FakeAttestation trusts another key. */
  private readonly key: Uint8Array;

  constructor(key: Uint8Array = randomBytes(32)) {
    this.key = Uint8Array.from(key);
  }

  /** An issuer signing with this platform's key. */
  issuer(): Issuer {
    const { key, variant, oid } = this;
    return {
      variant,
      oid,
      async issue(userData: Uint8Array, nonce: Uint8Array): Promise<Uint8Array> {
        return Uint8Array.from(Buffer.concat([mac(key, userData, nonce), userData]));
      },
    };
  }

  /** A validator trusting this platform's key only. */
  validator(): Validator {
    const { key, variant, oid } = this;
    return {
      variant,
      oid,
      async validate(document: Uint8Array, nonce: Uint8Array): Promise<ValidationResult> {
        if (document.length < MAC_SIZE)
          throw new AttestationError(
            'document-format',
            `fake attestation document is ${document.length} bytes`,
          );
        const userData = Uint8Array.from(document.subarray(MAC_SIZE));
        if (!timingSafeEqual(document.subarray(0, MAC_SIZE), mac(key, userData, nonce)))
          throw new AttestationError(
            'signature',
            'fake attestation MAC does not verify for this nonce and key',
          );
        return {
          userData,
          checks: [
            { name: 'document-format', ok: true, detail: 'MAC ‖ user data' },
            { name: 'signature', ok: true, detail: 'MAC over user data and nonce verifies' },
          ],
          warnings: [],
        };
      },
    };
  }
}
