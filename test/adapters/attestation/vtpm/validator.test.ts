/**
 * The vTPM document validator against upstream's TestValidate cases, with documents
 * from the software TPM (genuine TPM wire structures, RSA/RSA-PSS/ECC AKs) and, for the round trip,
 * from the real vTPM issuer on a real swtpm.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseEventLog, replayEventLog } from '../../../../src/adapters/attestation/eventlog/tcg-log.js';
import {
  decodeVtpmDocument,
  encodeVtpmDocument,
} from '../../../../src/adapters/attestation/shared/vtpm-document.js';
import { createQemuVtpmIssuer } from '../../../../src/adapters/attestation/vtpm/issuer.js';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { createValidator } from '../../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../../src/domain/measurements.js';
import type { Measurements } from '../../../../src/ports/types.js';
import type { Validator } from '../../../../src/ports/validator.js';
import { attestationRejection } from '../../../support/attestation-rejection.js';
import { SHA1, SHA256, SoftTpm, SoftVtpmIssuer } from '../../../support/soft-tpm.js';
import { useSwtpm } from '../../../support/swtpm.js';

const zero = Buffer.alloc(32);
const pcr4 = createHash('sha256').update('kernel').digest();

/** QEMU-style defaults: PCR 4 image-specific, 8/11/13/15 zero enforced. */
function qemuMeasurements(overrides: Array<[number, Buffer, boolean]> = []): Measurements {
  const m: Measurements = new Map([
    [4, { expected: pcr4, warnOnly: false }],
    [8, { expected: zero, warnOnly: false }],
    [11, { expected: zero, warnOnly: false }],
    [13, { expected: zero, warnOnly: false }],
    [15, { expected: zero, warnOnly: false }],
  ]);
  for (const [i, v, w] of overrides) m.set(i, { expected: v, warnOnly: w });
  return m;
}

function softTpm(key: 'rsa' | 'rsa-pss' | 'ecc' = 'rsa'): SoftTpm {
  const tpm = SoftTpm.create({ key });
  for (const b of [SHA1, SHA256]) tpm.setPcr(b, 4, b === SHA256 ? pcr4 : Buffer.alloc(20, 4));
  return tpm;
}

function qemuValidator(measurements = qemuMeasurements()): Validator {
  return createValidator('qemu-vtpm', { policy: new MeasurementsPolicy(measurements) });
}

const rejection = async (p: Promise<unknown>) => (await attestationRejection(p)).error;

const userData = createHash('sha256').update('tls spki').digest();
const nonce = randomBytes(32);
const rsaTpm = softTpm('rsa');

describe('vTPM validator (upstream TestValidate cases)', () => {
  it('valid: accepts and returns the user data with every check', async () => {
    const doc = await new SoftVtpmIssuer(rsaTpm).issue(userData, nonce);
    const res = await qemuValidator().validate(doc, nonce);
    expect(Buffer.from(res.userData).equals(userData)).toBe(true);
    expect(res.warnings).toEqual([]);
    expect(res.checks.map((c) => c.name)).toEqual([
      'document-format',
      'ak-attributes',
      'ak-trust',
      'sha256-quote',
      'quote-signature',
      'extra-data',
      'pcr-selection',
      'pcr-digest',
      'event-log',
      'cvm',
      'measurements',
    ]);
    expect(res.checks.every((c) => c.ok)).toBe(true);
  });

  it.each(['rsa-pss', 'ecc'] as const)('valid: accepts a %s attestation key', async (key) => {
    const doc = await new SoftVtpmIssuer(softTpm(key)).issue(userData, nonce);
    const res = await qemuValidator().validate(doc, nonce);
    expect(res.checks.find((c) => c.name === 'quote-signature')?.detail).toMatch(
      key === 'ecc' ? /ECDSA/ : /RSAPSS/,
    );
  });

  it('invalid nonce: refused at extra-data', async () => {
    const doc = await new SoftVtpmIssuer(rsaTpm).issue(userData, nonce);
    const err = await rejection(qemuValidator().validate(doc, randomBytes(32)));
    expect(err.check).toBe('extra-data');
    expect(err.code).toBe('permission-denied');
  });

  it('invalid signature (userData replaced): refused at extra-data', async () => {
    const doc = decodeVtpmDocument(await new SoftVtpmIssuer(rsaTpm).issue(userData, nonce));
    const forged = encodeVtpmDocument({ ...doc, userData: randomBytes(32) });
    expect((await rejection(qemuValidator().validate(forged, nonce))).check).toBe('extra-data');
  });

  it('untrusted attestation public key: a swapped ak_pub does not verify the quote', async () => {
    const doc = decodeVtpmDocument(await new SoftVtpmIssuer(rsaTpm).issue(userData, nonce));
    doc.attestation.akPub = softTpm().akPublic;
    const err = await rejection(qemuValidator().validate(encodeVtpmDocument(doc), nonce));
    expect(err.check).toBe('quote-signature');
  });

  it('untrusted attestation public key: a key without the restricted attribute is refused', async () => {
    const tpm = SoftTpm.create({ attributes: 0x00040072 });
    tpm.setPcr(SHA256, 4, pcr4);
    const err = await rejection(
      qemuValidator().validate(await new SoftVtpmIssuer(tpm).issue(userData, nonce), nonce),
    );
    expect(err.check).toBe('ak-attributes');
  });

  it('untrusted PCRs: refused with every enforced and warnOnly mismatch as expected vs actual', async () => {
    const doc = await new SoftVtpmIssuer(rsaTpm).issue(userData, nonce);
    const v = qemuValidator(
      qemuMeasurements([
        [4, Buffer.alloc(32, 0x44), false],
        [9, Buffer.alloc(32, 0x99), true],
        [12, Buffer.alloc(32, 0x12), false],
      ]),
    );
    const err = await rejection(v.validate(doc, nonce));
    expect(err.check).toBe('measurements');
    expect(err.mismatches.map((m) => [m.index, m.warnOnly])).toEqual([
      [4, false],
      [9, true],
      [12, false],
    ]);
    expect(Buffer.from(err.mismatches[0]?.actual as Uint8Array).equals(pcr4)).toBe(true);
    expect(err.message).toMatch(/PCR4: expected 4444.*got /);
    expect(err.message).toMatch(/PCR12/);
    expect(err.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual(['measurements']);
  });

  it('untrusted WarnOnly PCRs: accepted, the mismatch reported as a warning', async () => {
    const doc = await new SoftVtpmIssuer(rsaTpm).issue(userData, nonce);
    const warned: unknown[] = [];
    const logger = {
      debug() {},
      info() {},
      warn: (msg: string, f?: Record<string, unknown>) => warned.push([msg, f]),
      error() {},
      child() {
        return logger;
      },
    };
    const v = createValidator('qemu-vtpm', {
      policy: new MeasurementsPolicy(qemuMeasurements([[9, Buffer.alloc(32, 0x99), true]])),
      logger,
    });
    const res = await v.validate(doc, nonce);
    expect(res.warnings.map((w) => w.index)).toEqual([9]);
    expect(warned).toHaveLength(1);
  });

  it('no sha256 quote: a document with only a SHA-1 quote is refused', async () => {
    const doc = await new SoftVtpmIssuer(rsaTpm, 'qemu-vtpm', { banks: [SHA1] }).issue(userData, nonce);
    const err = await rejection(qemuValidator().validate(doc, nonce));
    expect(err.check).toBe('sha256-quote');
    expect(err.message).toMatch(/no sha256 quote/);
  });

  it('a SHA-1 quote next to the SHA-256 one is ignored, the SHA-256 one is what counts', async () => {
    const doc = decodeVtpmDocument(
      await new SoftVtpmIssuer(rsaTpm, 'qemu-vtpm', { banks: [SHA1, SHA256] }).issue(userData, nonce),
    );
    expect(doc.attestation.quotes.map((q) => q.pcrHashAlg)).toEqual([SHA1, SHA256]);
    // Break the SHA-256 quote: a valid SHA-1 quote must not rescue it.
    const q = doc.attestation.quotes[1];
    if (!q) throw new Error('no sha256 quote');
    q.pcrs.set(4, zero);
    expect((await rejection(qemuValidator().validate(encodeVtpmDocument(doc), nonce))).check).toBe(
      'pcr-digest',
    );
  });

  it.each([
    ['not JSON', Buffer.from('{"Attestation":')],
    ['JSON without Attestation', Buffer.from('{"UserData":"AA=="}')],
    ['bad base64', Buffer.from('{"Attestation":{"ak_pub":"!!"},"UserData":""}')],
    ['an empty object', Buffer.from('{}')],
  ])('invalid attestation document (%s): refused at document-format', async (_n, doc) => {
    expect((await rejection(qemuValidator().validate(doc, nonce))).check).toBe('document-format');
  });

  it('bootstrapped node: PCR 15 extended with a cluster ID fails the enforced zero PCR 15', async () => {
    const tpm = softTpm();
    await tpm.pcrEvent(15, randomBytes(32));
    const err = await rejection(
      qemuValidator().validate(await new SoftVtpmIssuer(tpm).issue(userData, nonce), nonce),
    );
    expect(err.check).toBe('measurements');
    expect(err.mismatches.map((m) => m.index)).toEqual([15]);
  });

  it('swapped Attestation keeping the userData fails', async () => {
    const issuer = new SoftVtpmIssuer(rsaTpm);
    const a = decodeVtpmDocument(await issuer.issue(userData, nonce));
    const b = decodeVtpmDocument(await issuer.issue(randomBytes(32), nonce));
    const swapped = encodeVtpmDocument({ ...a, attestation: b.attestation });
    expect((await rejection(qemuValidator().validate(swapped, nonce))).check).toBe('extra-data');
  });

  it('tampered documents are refused wherever a byte is flipped inside the quote or signature', async () => {
    const doc = decodeVtpmDocument(await new SoftVtpmIssuer(rsaTpm).issue(userData, nonce));
    const q = doc.attestation.quotes.find((x) => x.pcrHashAlg === SHA256);
    if (!q) throw new Error('no quote');
    const v = qemuValidator();
    for (const field of ['quote', 'rawSig'] as const) {
      for (let i = 0; i < q[field].length; i += 13) {
        const copy = Buffer.from(q[field]);
        copy[i] = (copy[i] as number) ^ 0x80;
        const forged = { ...q, [field]: copy };
        const d = encodeVtpmDocument({ ...doc, attestation: { ...doc.attestation, quotes: [forged] } });
        const err = await rejection(v.validate(d, nonce));
        expect(err.check, `${field}[${i}]`).toMatch(/quote-format|signature-format|quote-signature/);
      }
    }
  });

  it('replays a supplied event log against the quoted PCRs', async () => {
    const vectors = resolve(import.meta.dirname, '../../../../../shared/testvectors/go-tpm-tools');
    const log = readFileSync(resolve(vectors, 'eventlogs/cos-85-amd-sev.bin'));
    const replayed = replayEventLog(parseEventLog(log)).get(SHA256) as Map<number, Uint8Array>;
    const tpm = softTpm();
    for (const [i, v] of replayed) tpm.setPcr(SHA256, i, v);
    const measurements = qemuMeasurements([[4, Buffer.from(replayed.get(4) as Uint8Array), false]]);
    measurements.delete(8);
    const ok = await qemuValidator(measurements).validate(
      await new SoftVtpmIssuer(tpm, 'qemu-vtpm', { eventLog: log }).issue(userData, nonce),
      nonce,
    );
    expect(ok.checks.find((c) => c.name === 'event-log')?.detail).toMatch(/replays/);
    // The same log against PCRs it does not produce.
    const err = await rejection(
      qemuValidator().validate(
        await new SoftVtpmIssuer(softTpm(), 'qemu-vtpm', { eventLog: log }).issue(userData, nonce),
        nonce,
      ),
    );
    expect(err.check).toBe('event-log');
  });

  it('stops when the call is aborted', async () => {
    const doc = await new SoftVtpmIssuer(rsaTpm).issue(userData, nonce);
    const ac = new AbortController();
    ac.abort(new Error('caller gave up'));
    await expect(qemuValidator().validate(doc, nonce, { signal: ac.signal })).rejects.toThrow(
      /caller gave up/,
    );
  });
});

describe('vTPM validator with the real issuer on a real swtpm', () => {
  const startSwtpm = useSwtpm();

  it('issue then validate round trip, then a refused wrong nonce', async () => {
    const sw = await startSwtpm();
    const tpm = new Tpm2ToolsTpm({ tcti: sw.tcti });
    const issuer = createQemuVtpmIssuer(tpm);
    const pcrs = await tpm.readPcrs([...Array(24).keys()]);
    const measurements: Measurements = new Map(
      [0, 4, 8, 15].map((i) => [i, { expected: Buffer.from(pcrs.get(i) as Uint8Array), warnOnly: false }]),
    );
    const v = createValidator('qemu-vtpm', { policy: new MeasurementsPolicy(measurements) });
    const doc = await issuer.issue(userData, nonce);
    const res = await v.validate(doc, nonce);
    expect(Buffer.from(res.userData).equals(userData)).toBe(true);
    expect((await rejection(v.validate(doc, randomBytes(32)))).check).toBe('extra-data');
    // Mark the node as bootstrapped: PCR 15 changes and validation fails.
    await tpm.pcrEvent(15, randomBytes(32));
    const err = await rejection(v.validate(await issuer.issue(userData, nonce), nonce));
    expect(err.mismatches.map((m) => m.index)).toEqual([15]);
  });
});
