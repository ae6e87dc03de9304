/**
 * Contract suite for an attestation variant: an Issuer and the Validator of the same variant, the
 * two ends of attested TLS. The validator accepts the issuer's document for the right nonce and returns
 * exactly the bound user data with every check; it refuses tampered copies, another nonce, and
 * documents bound to other user data; a validator of a foreign variant refuses the document too.
 *
 * Seeding: `seed.tamper(document)` returns tampered copies that must be refused — each variant knows
 * which bytes its signatures cover (a byte flipped in Go JSON whitespace or an ignored field would
 * prove nothing), so the factory names them; {@link flipByteAt} helps build them.
 * `seed.foreignValidator` is a validator of another variant (or the same variant with other trust).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { variantOid } from '../../src/app/registry/index.js';
import { isAttestationError } from '../../src/ports/errors.js';
import type { Issuer } from '../../src/ports/issuer.js';
import type { Validator } from '../../src/ports/validator.js';
import { type ContractFactory, freshSubjects } from './harness.js';

/** The pair under test. */
export interface AttestationPair {
  issuer: Issuer;
  validator: Validator;
}

/** How the suite derives bad inputs for this variant. */
export interface AttestationSeed {
  /** Tampered copies of `document` (at least one) that the validator must refuse. */
  tamper(document: Uint8Array): Array<{ what: string; document: Uint8Array }>;
  /** A validator that must refuse this issuer's documents (another variant, or other trust). */
  foreignValidator: Validator;
}

/** Optional behaviour of a variant. */
export interface AttestationSupports {
  /** The validator may be called concurrently (every production validator must). */
  concurrentValidation: boolean;
}

/** Returns a copy of `data` with the byte at `index` XOR-ed with `mask`. */
export function flipByteAt(data: Uint8Array, index: number, mask = 0x01): Uint8Array {
  const copy = Uint8Array.from(data);
  copy[index] = (copy[index] as number) ^ mask;
  return copy;
}

async function refusal(p: Promise<unknown>, what: string): Promise<void> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err === undefined) throw new Error(`${what}: the validator accepted it`);
  expect(isAttestationError(err), `${what}: want an AttestationError, got ${String(err)}`).toBe(true);
}

/** Registers the attestation contract tests for one variant's issuer and validator. */
export function describeAttestationContract(
  name: string,
  factory: ContractFactory<AttestationPair, AttestationSeed, AttestationSupports>,
): void {
  describe(`Attestation contract: ${name}`, () => {
    const fresh = freshSubjects(factory);

    it('issuer and validator name the same variant and its OID', async () => {
      const { subject } = await fresh();
      expect(subject.issuer.variant).toBe(subject.validator.variant);
      expect(subject.issuer.oid).toBe(variantOid(subject.issuer.variant));
      expect(subject.validator.oid).toBe(subject.issuer.oid);
    });

    it('accepts its own document and returns exactly the bound user data with every check passed', async () => {
      const { subject } = await fresh();
      const userData = randomBytes(32);
      const nonce = randomBytes(32);
      const res = await subject.validator.validate(await subject.issuer.issue(userData, nonce), nonce);
      expect(Buffer.from(res.userData).equals(userData)).toBe(true);
      expect(res.checks.length).toBeGreaterThan(0);
      expect(res.checks.filter((c) => !c.ok)).toEqual([]);
    });

    it('refuses tampered documents', async () => {
      const { subject, seed } = await fresh();
      const nonce = randomBytes(32);
      const doc = await subject.issuer.issue(randomBytes(32), nonce);
      const tampered = seed.tamper(doc);
      expect(tampered.length).toBeGreaterThan(0);
      for (const t of tampered) {
        expect(Buffer.from(t.document).equals(Buffer.from(doc)), `${t.what} changes the document`).toBe(
          false,
        );
        await refusal(subject.validator.validate(t.document, nonce), t.what);
      }
    });

    it('refuses a wrong nonce, including one differing in a single bit, and an empty one', async () => {
      const { subject } = await fresh();
      const nonce = randomBytes(32);
      const doc = await subject.issuer.issue(randomBytes(32), nonce);
      await refusal(subject.validator.validate(doc, randomBytes(32)), 'a random nonce');
      await refusal(subject.validator.validate(doc, flipByteAt(nonce, 31)), 'a nonce with one bit flipped');
      await refusal(subject.validator.validate(doc, new Uint8Array()), 'an empty nonce');
    });

    it("binds the user data: another document's user data does not validate", async () => {
      const { subject } = await fresh();
      const nonce = randomBytes(32);
      const a = await subject.issuer.issue(randomBytes(32), nonce);
      const b = await subject.issuer.issue(randomBytes(32), nonce);
      expect(Buffer.from(a).equals(Buffer.from(b))).toBe(false);
      const ra = await subject.validator.validate(a, nonce);
      const rb = await subject.validator.validate(b, nonce);
      expect(Buffer.from(ra.userData).equals(Buffer.from(rb.userData))).toBe(false);
    });

    it("a foreign variant's validator refuses the document", async () => {
      const { subject, seed } = await fresh();
      const nonce = randomBytes(32);
      const doc = await subject.issuer.issue(randomBytes(32), nonce);
      await refusal(
        seed.foreignValidator.validate(doc, nonce),
        `the ${seed.foreignValidator.variant} validator`,
      );
    });

    it('validates concurrently', async (ctx) => {
      const { subject, supports } = await fresh();
      if (!supports.concurrentValidation) ctx.skip();
      // allSettled, not all: a failed call must not leave the others running into the next test.
      const issued = await Promise.allSettled(
        Array.from({ length: 6 }, async () => {
          const userData = randomBytes(32);
          const nonce = randomBytes(32);
          return { userData, nonce, doc: await subject.issuer.issue(userData, nonce) };
        }),
      );
      const inputs = issued.map((r, k) => {
        if (r.status === 'rejected') throw new Error(`concurrent issue ${k} failed: ${String(r.reason)}`);
        return r.value;
      });
      const results = await Promise.allSettled(inputs.map((i) => subject.validator.validate(i.doc, i.nonce)));
      results.forEach((r, k) => {
        if (r.status === 'rejected')
          throw new Error(`concurrent validation ${k} failed: ${String(r.reason)}`);
        expect(Buffer.from(r.value.userData).equals(inputs[k]?.userData as Buffer)).toBe(true);
      });
    });
  });
}
