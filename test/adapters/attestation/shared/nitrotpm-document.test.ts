/**
 * AWS's NitroTPM attestation document, verified with the real one captured on EC2 on 2026-02-03
 * (../shared/testvectors/aws-nitrotpm, read at test time, never copied): accepted at its own time
 * with its nonce; refused at today's date (its leaf lived three hours), with another nonce, after
 * a change of ANY single byte of its payload (every payload byte position is tried), and with a
 * tampered signature, protected header or certificate.
 */
import { X509Certificate } from 'node:crypto';
import { decode, encode } from 'cbor2';
import { expect, it } from 'vitest';
import { CheckRecorder } from '../../../../src/adapters/attestation/shared/checks.js';
import {
  AWS_NITRO_ROOT_SHA256,
  type NitroTpmVerifyOptions,
  verifyNitroTpmDocument,
} from '../../../../src/adapters/attestation/shared/nitrotpm-document.js';
import { AttestationError } from '../../../../src/ports/errors.js';
import { describeVectors, HAVE_VECTORS, vec } from '../snp/vectors.js';

interface Fixture {
  nonce: string;
  pcrs: { sha384: Record<string, string> };
  ak_pubkeys: { ecc_p256: { x: string; y: string } };
  attestation: { nitro: { document: string } };
}

const fixture: Fixture | undefined = HAVE_VECTORS
  ? JSON.parse(vec('aws-nitrotpm/vaportpm-test-nitro-fixture.json').toString('utf8'))
  : undefined;
const document = fixture ? Buffer.from(fixture.attestation.nitro.document, 'hex') : Buffer.alloc(0);
const nonce = fixture ? Buffer.from(fixture.nonce, 'hex') : Buffer.alloc(0);
/** The document's own `timestamp` (2026-02-03 10:12:02.437 UTC), inside the leaf's three hours. */
const signedAt = new Date(1770113522437);

function verify(bytes: Uint8Array, options: Partial<NitroTpmVerifyOptions> = {}) {
  const rec = new CheckRecorder();
  const doc = verifyNitroTpmDocument(bytes, { at: signedAt, nonce, ...options }, rec);
  return { doc, checks: rec.checks };
}

/** The failed check's name, or `accepted`. */
function verdict(bytes: Uint8Array, options: Partial<NitroTpmVerifyOptions> = {}): string {
  try {
    verify(bytes, options);
    return 'accepted';
  } catch (err) {
    if (err instanceof AttestationError) return err.check;
    throw err;
  }
}

/** `v` with every Node Buffer as a plain Uint8Array (cbor2 encodes a Buffer through its toJSON). */
function plain(v: unknown): unknown {
  if (v instanceof Uint8Array) return new Uint8Array(v);
  if (Array.isArray(v)) return v.map(plain);
  if (v instanceof Map) return new Map([...v].map(([k, x]) => [k, plain(x)]));
  return v;
}

/** CBOR of `v` with byte strings kept as byte strings. */
function cbor(v: unknown): Uint8Array {
  return encode(plain(v));
}

/** The COSE_Sign1's four parts (the outer array is untagged in AWS's documents). */
function parts(): [Uint8Array, Map<unknown, unknown>, Uint8Array, Uint8Array] {
  return decode(document, { preferMap: true }) as [Uint8Array, Map<unknown, unknown>, Uint8Array, Uint8Array];
}

/** The document with its payload map changed by `edit` and re-encoded (signature unchanged). */
function withPayload(edit: (m: Map<unknown, unknown>) => void): Uint8Array {
  const [prot, unprot, payload, sig] = parts();
  const m = decode(payload, { preferMap: true }) as Map<unknown, unknown>;
  edit(m);
  return cbor([prot, unprot, cbor(m), sig]);
}

describeVectors('NitroTPM attestation document (real EC2 document of 2026-02-03)', () => {
  it('is accepted at its own time with its nonce, and carries the fixture PCRs and AK', () => {
    const f = fixture as Fixture;
    const { doc, checks } = verify(document);
    expect(checks.map((c) => [c.name, c.ok])).toEqual([
      ['nitrotpm-format', true],
      ['nitrotpm-signature', true],
      ['nitrotpm-certificate', true],
      ['nitrotpm-nonce', true],
    ]);
    expect(doc.moduleId).toBe('i-01cfb383223e42522-tpm0000000000000000');
    expect(doc.timestamp.toISOString()).toBe('2026-02-03T10:12:02.437Z');
    expect(doc.pcrs.size).toBe(24);
    for (const [i, hex] of Object.entries(f.pcrs.sha384))
      expect(Buffer.from(doc.pcrs.get(Number(i)) as Uint8Array).toString('hex')).toBe(hex);
    expect(Buffer.from(doc.publicKey as Uint8Array).toString('hex')).toBe(
      `04${f.ak_pubkeys.ecc_p256.x}${f.ak_pubkeys.ecc_p256.y}`,
    );
    const root = new X509Certificate(Buffer.from(doc.cabundle[0] as Uint8Array));
    expect(root.fingerprint256.replaceAll(':', '').toLowerCase()).toBe(AWS_NITRO_ROOT_SHA256);
  });

  it("is refused at today's date: its certificates have expired", () => {
    const err = (() => {
      try {
        verify(document, { at: new Date() });
      } catch (e) {
        return e as AttestationError;
      }
      throw new Error('accepted');
    })();
    expect(err.check).toBe('nitrotpm-certificate');
    expect(err.message).toMatch(/is not valid at/);
  });

  it('is refused one second after its leaf certificate expired (13:12:02 UTC)', () => {
    expect(verdict(document, { at: new Date('2026-02-03T13:12:03Z') })).toBe('nitrotpm-certificate');
    expect(verdict(document, { at: new Date('2026-02-03T13:12:01Z') })).toBe('accepted');
  });

  it('is refused with another nonce, a shorter nonce and an empty one', () => {
    const other = Buffer.from(nonce);
    other[31] = (other[31] as number) ^ 1;
    expect(verdict(document, { nonce: other })).toBe('nitrotpm-nonce');
    expect(verdict(document, { nonce: nonce.subarray(0, 31) })).toBe('nitrotpm-nonce');
    expect(verdict(document, { nonce: new Uint8Array(0) })).toBe('nitrotpm-nonce');
  });

  it('is refused when its root is not the pinned one', () => {
    expect(verdict(document, { rootSha256: ['00'.repeat(32)] })).toBe('nitrotpm-certificate');
  });

  it('is refused after ANY single byte of its payload changes (every position, XOR 0x01)', {
    timeout: 180_000,
  }, () => {
    const payload = Buffer.from(parts()[2]);
    const offset = document.indexOf(payload);
    expect(offset).toBeGreaterThan(0);
    const accepted: number[] = [];
    for (let i = 0; i < payload.length; i++) {
      const copy = Buffer.from(document);
      copy[offset + i] = (copy[offset + i] as number) ^ 0x01;
      if (verdict(copy) === 'accepted') accepted.push(i);
    }
    expect(payload.length).toBeGreaterThan(4000);
    expect(accepted).toEqual([]);
  });

  it('refuses every truncation of the document with nitrotpm-format (no other kind of error)', () => {
    for (let n = 0; n < document.length; n++)
      expect(verdict(document.subarray(0, n))).toBe('nitrotpm-format');
  });

  it('is refused with a tampered signature (every byte position)', () => {
    const sig = Buffer.from(parts()[3]);
    const offset = document.lastIndexOf(sig);
    expect(offset + sig.length).toBe(document.length);
    for (let i = 0; i < sig.length; i++) {
      const copy = Buffer.from(document);
      copy[offset + i] = (copy[offset + i] as number) ^ 0x01;
      expect(verdict(copy)).toBe('nitrotpm-signature');
    }
  });

  it('is refused with another protected header (alg ES256, or extra parameters)', () => {
    const [, unprot, payload, sig] = parts();
    const es256 = encode(new Map([[1, -7]]));
    expect(verdict(cbor([es256, unprot, payload, sig]))).toBe('nitrotpm-signature');
    const extra = encode(
      new Map<number, unknown>([
        [1, -35],
        [4, new Uint8Array([1])],
      ]),
    );
    expect(verdict(cbor([extra, unprot, payload, sig]))).toBe('nitrotpm-signature');
  });

  it('is refused with a certificate or CA bundle swapped, dropped or reordered (signature now breaks)', () => {
    const cases: Array<[string, (m: Map<unknown, unknown>) => void]> = [
      ['leaf replaced by cabundle[3]', (m) => m.set('certificate', (m.get('cabundle') as Uint8Array[])[3])],
      ['root dropped', (m) => m.set('cabundle', (m.get('cabundle') as Uint8Array[]).slice(1))],
      [
        'intermediates reversed',
        (m) => m.set('cabundle', [...(m.get('cabundle') as Uint8Array[])].reverse()),
      ],
      ['nonce removed', (m) => m.delete('nonce')],
      [
        'PCR 4 changed',
        (m) => (m.get('nitrotpm_pcrs') as Map<number, Uint8Array>).set(4, new Uint8Array(48)),
      ],
    ];
    for (const [, edit] of cases) expect(verdict(withPayload(edit))).not.toBe('accepted');
  });

  it('checks the chain itself: an unchanged payload whose root is unpinned fails at the chain, not earlier', () => {
    // The signature is by the leaf; the chain step then refuses a root that is not pinned.
    const res = (() => {
      try {
        verify(document, { rootSha256: [] });
      } catch (e) {
        return e as AttestationError;
      }
      throw new Error('accepted');
    })();
    expect(res.checks.map((c) => [c.name, c.ok])).toEqual([
      ['nitrotpm-format', true],
      ['nitrotpm-signature', true],
      ['nitrotpm-certificate', false],
    ]);
  });
});

it('refuses non-documents with nitrotpm-format (no vectors needed)', () => {
  for (const bytes of [
    new Uint8Array(0),
    new Uint8Array([0xff]),
    encode([1, 2, 3]),
    encode([new Uint8Array(0), new Map(), new Uint8Array(0), new Uint8Array(0)]),
    new Uint8Array(64 * 1024),
  ])
    expect(verdict(bytes)).toBe('nitrotpm-format');
});
