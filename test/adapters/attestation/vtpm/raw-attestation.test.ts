/**
 * The two real GCE attestations of go-tpm-tools (testvectors §1.1): accepted with nonce 9009 / empty
 * and the AK certificate chained to tpm_ek_root_1 via tpm_ek_intermediate_2; tampered copies refused.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseEventLog } from '../../../../src/adapters/attestation/eventlog/tcg-log.js';
import {
  decodeAttestationPb,
  encodeAttestationPb,
  type TpmAttestation,
} from '../../../../src/adapters/attestation/shared/vtpm-document.js';
import { parseCertificates } from '../../../../src/adapters/attestation/shared/x509-chain.js';
import { verifyRawAttestation } from '../../../../src/adapters/attestation/vtpm/raw-attestation.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import { SoftTpm } from '../../../support/soft-tpm.js';

const vectors = resolve(import.meta.dirname, '../../../../../shared/testvectors/go-tpm-tools');
const read = (p: string) => readFileSync(resolve(vectors, p));
const root = await parseCertificates(read('ca-certs/tpm_ek_root_1.cer'), 'root');
const intermediate = await parseCertificates(read('ca-certs/tpm_ek_intermediate_2.crt'), 'intermediate');
const otherIntermediate = await parseCertificates(
  read('ca-certs/tpm_ek_intermediate_3.crt'),
  'intermediate 3',
);
const at = new Date('2026-11-21T00:00:00Z');
const trust = { roots: root, intermediates: intermediate, at };

const files = [
  { file: 'attestations/gce-cos-85-nonce9009.pb', nonce: Buffer.from([0x90, 0x09]) },
  { file: 'attestations/gce-cos-85-no-nonce.pb', nonce: Buffer.alloc(0) },
];

const rejection = async (p: Promise<unknown>) => (await attestationRejection(p)).error;

function tampered(raw: Uint8Array, edit: (att: TpmAttestation) => void): Uint8Array {
  const att = decodeAttestationPb(raw);
  edit(att);
  return encodeAttestationPb(att);
}

describe.each(files)('real GCE attestation $file', ({ file, nonce }) => {
  const raw = read(file);

  it('is accepted: AK cert chain, SHA-256 quote signature, nonce, PCR digest, event log', async () => {
    const res = await verifyRawAttestation(raw, { nonce, trust });
    expect(res.checks.every((c) => c.ok)).toBe(true);
    expect(res.checks.map((c) => c.name)).toEqual([
      'document-format',
      'ak-attributes',
      'ak-certificate',
      'ak-trust',
      'sha256-quote',
      'quote-signature',
      'extra-data',
      'pcr-selection',
      'pcr-digest',
      'event-log',
      'measurements',
    ]);
    const pcrs = res.verified.quote.pcrs;
    expect(Buffer.from(pcrs.get(0) as Uint8Array).toString('hex')).toBe(
      '0f35c214608d93c7a6e68ae7359b4a8be5a0e99eea9107ece427c4dea4e439cf',
    );
    expect(Buffer.from(pcrs.get(4) as Uint8Array).toString('hex')).toBe(
      'd690bdac2aa8b73a1d718cb91990df07d0747b07ea57b3b2d0f0d511f0d90491',
    );
    expect(res.verified.eventLog?.format).toBe('crypto-agile');
  });

  it('survives a protobuf round trip unchanged', () => {
    const once = decodeAttestationPb(new Uint8Array(raw));
    expect(decodeAttestationPb(encodeAttestationPb(once))).toEqual(once);
    expect(once.quotes.map((q) => q.pcrHashAlg)).toEqual([0x0004, 0x000b, 0x000c]);
  });

  it('is accepted with the AK itself as trusted key', async () => {
    const akCert = (await parseCertificates(decodeAttestationPb(raw).akCert, 'ak'))[0];
    const { createPublicKey } = await import('node:crypto');
    const key = createPublicKey({
      key: Buffer.from(akCert?.publicKey.rawData as ArrayBuffer),
      format: 'der',
      type: 'spki',
    });
    const res = await verifyRawAttestation(raw, { nonce, trust: { trustedAk: key } });
    expect(res.checks.find((c) => c.name === 'ak-trust')?.ok).toBe(true);
  });

  it.each([
    ['a flipped byte in the quote', 'quote-signature', (a: TpmAttestation) => flip(a, 'quote', 40)],
    ['a flipped byte in the signature', 'quote-signature', (a: TpmAttestation) => flip(a, 'rawSig', 100)],
    [
      'a changed PCR value',
      'pcr-digest',
      (a: TpmAttestation) => {
        const q = sha256Quote(a);
        const v = Buffer.from(q.pcrs.get(4) as Uint8Array);
        v[0] = (v[0] as number) ^ 1;
        q.pcrs.set(4, v);
      },
    ],
    [
      'a replaced AK',
      'ak-trust',
      (a: TpmAttestation) => {
        a.akPub = SoftTpm.create().akPublic;
      },
    ],
    [
      'a changed IMA PCR10 (not covered by the log, caught by the digest)',
      'pcr-digest',
      (a: TpmAttestation) => {
        sha256Quote(a).pcrs.set(10, Buffer.alloc(32));
      },
    ],
  ])('is refused with %s (%s)', async (_what, check, edit) => {
    const err = await rejection(verifyRawAttestation(tampered(raw, edit), { nonce, trust }));
    expect(err.check).toBe(check);
    expect(err.checks.at(-1)).toMatchObject({ name: check, ok: false });
  });

  it('is refused with a wrong nonce', async () => {
    const err = await rejection(verifyRawAttestation(raw, { nonce: Buffer.from([0x90, 0x0a]), trust }));
    expect(err.check).toBe('extra-data');
  });

  it('is refused without the intermediate, with the wrong intermediate, and without roots', async () => {
    expect((await rejection(verifyRawAttestation(raw, { nonce, trust: { roots: root, at } }))).check).toBe(
      'ak-certificate',
    );
    expect(
      (
        await rejection(
          verifyRawAttestation(raw, { nonce, trust: { roots: root, intermediates: otherIntermediate, at } }),
        )
      ).check,
    ).toBe('ak-certificate');
    expect((await rejection(verifyRawAttestation(raw, { nonce, trust: { roots: [], at } }))).check).toBe(
      'ak-certificate',
    );
  });

  it('is accepted with the intermediate carried in field 7 instead of the options', async () => {
    const withInter = tampered(raw, (a) => {
      a.intermediateCerts = [read('ca-certs/tpm_ek_intermediate_2.crt')];
    });
    const res = await verifyRawAttestation(withInter, { nonce, trust: { roots: root, at } });
    expect(res.checks.every((c) => c.ok)).toBe(true);
  });

  it('is refused with a malformed intermediate in field 7', async () => {
    const bad = tampered(raw, (a) => {
      a.intermediateCerts = [Buffer.from('not a certificate')];
    });
    expect((await rejection(verifyRawAttestation(bad, { nonce, trust }))).check).toBe('ak-certificate');
  });

  it('is refused after the AK certificate expired (2051-08-24)', async () => {
    const err = await rejection(
      verifyRawAttestation(raw, { nonce, trust: { ...trust, at: new Date('2052-01-01T00:00:00Z') } }),
    );
    expect(err.check).toBe('ak-certificate');
    expect(err.message).toMatch(/not valid at 2052/);
  });

  it('is refused when only SHA-1 and SHA-384 quotes remain', async () => {
    const noSha256 = tampered(raw, (a) => {
      a.quotes = a.quotes.filter((q) => q.pcrHashAlg !== 0x000b);
    });
    const err = await rejection(verifyRawAttestation(noSha256, { nonce, trust }));
    expect(err.check).toBe('sha256-quote');
    expect(err.message).toMatch(/no sha256 quote/);
  });

  it('is refused when the event log is changed', async () => {
    const bad = tampered(raw, (a) => {
      const log = Buffer.from(a.eventLog);
      // Flip a byte of the SHA-256 digest of the last PCR4 event (the bootloader measurement).
      const ev = parseEventLog(log)
        .events.filter((e) => e.pcr === 4)
        .at(-1);
      const at = log.indexOf(Buffer.from(ev?.digests.get(0x000b) as Uint8Array));
      expect(at).toBeGreaterThan(0);
      log[at] = (log[at] as number) ^ 0xff;
      a.eventLog = log;
    });
    const err = await rejection(verifyRawAttestation(bad, { nonce, trust }));
    expect(err.check).toBe('event-log');
    expect(err.message).toMatch(/PCR4 replays to/);
  });

  it('never crashes on truncated or garbled protobuf', async () => {
    for (const cut of [1, 5, 50, 500, 5000, raw.length - 1]) {
      const err = await rejection(verifyRawAttestation(raw.subarray(0, cut), { nonce, trust }));
      expect(err.check).toMatch(/format|quote|ak-|event-log|sha256/);
    }
  });
});

function sha256Quote(a: TpmAttestation) {
  const q = a.quotes.find((x) => x.pcrHashAlg === 0x000b);
  if (!q) throw new Error('no sha256 quote');
  return q;
}

function flip(a: TpmAttestation, field: 'quote' | 'rawSig', at: number): void {
  const q = sha256Quote(a);
  const b = Buffer.from(q[field]);
  b[at] = (b[at] as number) ^ 0x01;
  q[field] = b;
}
