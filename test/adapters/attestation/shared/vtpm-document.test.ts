/**
 * upstream's vTPM attestation document and go-tpm-tools' Attestation protobuf, on the two REAL GCE
 * attestations of go-tpm-tools in ../shared/testvectors.
 */
import { describe, expect, it } from 'vitest';
import {
  decodeAttestationPb,
  decodeVtpmDocument,
  encodeAttestationPb,
  encodeVtpmDocument,
} from '../../../../src/adapters/attestation/shared/vtpm-document.js';
import { isAttestationError } from '../../../../src/ports/errors.js';
import { describeVectors, vec } from '../snp/vectors.js';

const refusal = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a refusal');
};

describeVectors('vTPM documents around a REAL GCE attestation', () => {
  const raw = new Uint8Array(vec('go-tpm-tools/attestations/gce-cos-85-nonce9009.pb'));

  it('decodes the protobuf: AK, SHA-1/256/384 quotes, event log, AK certificate; and what it keeps survives encoding', () => {
    const att = decodeAttestationPb(raw);
    expect(att.akPub.length).toBeGreaterThan(0);
    expect(att.quotes.length).toBeGreaterThanOrEqual(2);
    expect(att.eventLog.length).toBeGreaterThan(0);
    expect(att.akCert.length).toBeGreaterThan(0);
    expect(att.quotes.map((q) => q.pcrHashAlg)).toEqual([0x0004, 0x000b, 0x000c]);
    expect(decodeAttestationPb(encodeAttestationPb(att))).toEqual(att);
  });

  it("writes Go's JSON (field order, TeeAttestation null) and reads it back unchanged", () => {
    const attestation = decodeAttestationPb(raw);
    const doc = { attestation, instanceInfo: Buffer.from('{"zone":"z"}'), userData: Buffer.from('user') };
    const json = Buffer.from(encodeVtpmDocument(doc)).toString();
    expect(json.startsWith('{"Attestation":{"ak_pub":"')).toBe(true);
    expect(json).toContain('"TeeAttestation":null');
    expect(json.indexOf('"InstanceInfo"')).toBeGreaterThan(json.indexOf('"Attestation"'));
    const back = decodeVtpmDocument(Buffer.from(json));
    expect(
      Buffer.from(encodeAttestationPb(back.attestation)).equals(
        Buffer.from(encodeAttestationPb(attestation)),
      ),
    ).toBe(true);
    expect(Buffer.from(back.instanceInfo ?? []).toString()).toBe('{"zone":"z"}');
    expect(Buffer.from(back.userData).toString()).toBe('user');
    expect(
      decodeVtpmDocument(encodeVtpmDocument({ ...doc, instanceInfo: undefined })).instanceInfo,
    ).toBeUndefined();
  });
});

describe('decodeVtpmDocument refuses what is not a document', () => {
  it.each([
    ['not JSON', '{', /^decoding attestation document: invalid JSON: /],
    ['an array', '[]', 'decoding attestation document: not a JSON object'],
    ['no Attestation', '{"UserData":""}', 'decoding attestation document: Attestation is missing'],
    [
      'quotes not an array',
      '{"Attestation":{"quotes":{}}}',
      'decoding attestation document: Attestation.quotes is not an array',
    ],
  ])('%s', (_n, text, message) => {
    const err = refusal(() => decodeVtpmDocument(Buffer.from(text)));
    expect(isAttestationError(err) && err.check).toBe('document-format');
    expect(err.message).toMatch(message);
  });

  it('refuses garbled protobuf without crashing', () => {
    expect(() => decodeAttestationPb(Buffer.from([0x0a, 0xff, 0xff]))).toThrow();
  });
});
