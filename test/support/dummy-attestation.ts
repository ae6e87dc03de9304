/**
 * The `dummy` issuer/validator (upstream's atls FakeIssuer/FakeValidator), for tests only. The
 * document is Go-JSON `{"UserData": b64, "Nonce": b64}` and proves nothing; no production wiring or
 * CLI flag can reach this file (it lives under test/ and is not in the build).
 */

import { variantOid } from '../../src/app/registry/index.js';
import { AttestationError } from '../../src/ports/errors.js';
import type { Issuer } from '../../src/ports/issuer.js';
import type { ValidationResult, Validator } from '../../src/ports/validator.js';
import type { Variant } from '../../src/ports/variant.js';

/** Issues `{"UserData","Nonce"}` documents under `variant`'s OID (default dummy). */
export class DummyIssuer implements Issuer {
  readonly oid: string;
  constructor(readonly variant: Variant = 'dummy') {
    this.oid = variantOid(variant);
  }
  async issue(userData: Uint8Array, nonce: Uint8Array): Promise<Uint8Array> {
    const doc = {
      UserData: Buffer.from(userData).toString('base64'),
      Nonce: Buffer.from(nonce).toString('base64'),
    };
    return new TextEncoder().encode(JSON.stringify(doc));
  }
}

/** Accepts dummy documents whose Nonce equals the expected nonce. */
export class DummyValidator implements Validator {
  readonly oid: string;
  readonly calls: Array<{ document: Uint8Array; nonce: Uint8Array }> = [];
  constructor(readonly variant: Variant = 'dummy') {
    this.oid = variantOid(variant);
  }
  async validate(document: Uint8Array, nonce: Uint8Array): Promise<ValidationResult> {
    this.calls.push({ document, nonce });
    let doc: { UserData?: unknown; Nonce?: unknown };
    try {
      doc = JSON.parse(new TextDecoder().decode(document));
    } catch (err) {
      throw new AttestationError('document-format', 'invalid dummy attestation document', { cause: err });
    }
    if (typeof doc.UserData !== 'string' || typeof doc.Nonce !== 'string')
      throw new AttestationError('document-format', 'dummy document lacks UserData or Nonce');
    if (!Buffer.from(doc.Nonce, 'base64').equals(Buffer.from(nonce)))
      throw new AttestationError('nonce', 'nonce does not match');
    return {
      userData: new Uint8Array(Buffer.from(doc.UserData, 'base64')),
      checks: [{ name: 'nonce', ok: true }],
      warnings: [],
    };
  }
}
