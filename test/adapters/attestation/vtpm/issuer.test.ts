import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  createQemuVtpmIssuer,
  encodeAttestationDocument,
  makeExtraData,
  makeTpmNonce,
  VtpmIssuer,
} from '../../../../src/adapters/attestation/vtpm/issuer.js';
import { Tpm2ToolsTpm } from '../../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { DUMMY_OID, variantOid } from '../../../../src/app/registry/index.js';
import { useSwtpm } from '../../../support/swtpm.js';
import { useTmpDirs } from '../../../support/tmp.js';
import { checkQuote, extraDataOf, rsaAkPem } from '../../tpm/tpm-test-helpers.js';

const sha256 = (...parts: Uint8Array[]): Buffer => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};
const userData = sha256(Buffer.from('TLS public key'));
const verifierNonce = sha256(Buffer.from('verifier nonce'));
const B64 = '"[A-Za-z0-9+/]+={0,2}"';

/** The Go-JSON document, as parsed JSON (for values) and as text (for key order). */
interface Doc {
  Attestation: {
    ak_pub: string;
    quotes: Array<{ quote: string; raw_sig: string; pcrs: { hash: number; pcrs: Record<string, string> } }>;
    event_log?: string;
    TeeAttestation: null;
  };
  InstanceInfo: string | null;
  UserData: string;
}
const parse = (bytes: Uint8Array): { doc: Doc; text: string } => {
  const text = new TextDecoder().decode(bytes);
  return { doc: JSON.parse(text) as Doc, text };
};
const b = (s: string): Buffer => Buffer.from(s, 'base64');

describe('encodeAttestationDocument', () => {
  it('writes exactly what Go encoding/json writes for vtpm.AttestationDocument', () => {
    const pcrs = new Map<number, Uint8Array>([
      [2, Uint8Array.of(2)],
      [10, Uint8Array.of(10)],
      [1, Uint8Array.of(1)],
    ]);
    const text = new TextDecoder().decode(
      encodeAttestationDocument({
        akPub: Uint8Array.of(1, 2, 3),
        quotes: [{ quote: Uint8Array.of(0xff), rawSig: Uint8Array.of(0xfb, 0xff), hash: 11, pcrs }],
        instanceInfo: undefined,
        userData: Uint8Array.of(0xfe),
      }),
    );
    expect(text).toBe(
      '{"Attestation":{"ak_pub":"AQID","quotes":[{"quote":"/w==","raw_sig":"+/8=","pcrs":{"hash":11,' +
        '"pcrs":{"1":"AQ==","10":"Cg==","2":"Ag=="}}}],"TeeAttestation":null},"InstanceInfo":null,"UserData":"/g=="}',
    );
  });

  it('includes event_log and instance info when present, and omits empty tagged fields', () => {
    const text = new TextDecoder().decode(
      encodeAttestationDocument({
        akPub: new Uint8Array(0),
        quotes: [],
        eventLog: Uint8Array.of(7),
        instanceInfo: new Uint8Array(0),
        userData: new Uint8Array(0),
      }),
    );
    expect(text).toBe(
      '{"Attestation":{"event_log":"Bw==","TeeAttestation":null},"InstanceInfo":"","UserData":""}',
    );
  });
});

describe('VtpmIssuer on swtpm', () => {
  const swtpm = useSwtpm();
  const tmp = useTmpDirs();

  it('qemu-vtpm: the document has upstream shape and its quote binds SHA256(userData ‖ nonce)', async () => {
    const s = await swtpm();
    const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
    const issuer = createQemuVtpmIssuer(tpm, { oid: variantOid('qemu-vtpm') });
    expect(issuer.variant).toBe('qemu-vtpm');
    expect(issuer.oid).toBe('1.3.9900.5.1');
    expect('oid' in createQemuVtpmIssuer(tpm)).toBe(false); // documents only, for no attested TLS

    const { doc, text } = parse(await issuer.issue(userData, verifierNonce));
    const goOrder = Array.from({ length: 24 }, (_, i) => String(i)).sort();
    const pcrEntries = goOrder.map((k) => `"${k}":${B64}`).join(',');
    expect(text).toMatch(
      new RegExp(
        `^\\{"Attestation":\\{"ak_pub":${B64},"quotes":\\[\\{"quote":${B64},"raw_sig":${B64},` +
          `"pcrs":\\{"hash":11,"pcrs":\\{${pcrEntries}\\}\\}\\}\\],"TeeAttestation":null\\},` +
          `"InstanceInfo":null,"UserData":${B64}\\}$`,
      ),
    );
    expect(b(doc.UserData).equals(userData)).toBe(true);
    const akPub = b(doc.Attestation.ak_pub);
    expect(akPub.equals(Buffer.from(await tpm.attestationKeyPublic()))).toBe(true);

    const [q] = doc.Attestation.quotes;
    if (!q) throw new Error('no quote');
    // No instance info: tpmNonce = SHA256(SHA256(userData ‖ nonce)).
    const tpmNonce = sha256(sha256(userData, verifierNonce));
    expect(extraDataOf(b(q.quote)).equals(tpmNonce)).toBe(true);
    expect(await checkQuote(tmp(), rsaAkPem(akPub), b(q.quote), b(q.raw_sig), tpmNonce)).toBe(true);
    // The PCR map is the quoted SHA-256 bank, which the quote's digest covers.
    const current = await tpm.readPcrs(Object.keys(q.pcrs.pcrs).map(Number));
    for (const [i, v] of current) expect(q.pcrs.pcrs[String(i)]).toBe(Buffer.from(v).toString('base64'));
  });

  it('binds the variant instance info: tpmNonce = SHA256(instanceInfo ‖ extraData)', async () => {
    const s = await swtpm();
    const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
    const info = Buffer.from('{"region":"eu-central-1","imageId":"ami-0123"}');
    const seen: Uint8Array[] = [];
    const issuer = new VtpmIssuer({
      variant: 'aws-nitro-tpm',
      oid: variantOid('aws-nitro-tpm'),
      tpm,
      instanceInfo: async (extraData) => {
        seen.push(extraData);
        return info;
      },
    });
    expect(issuer.oid).toBe('1.3.9900.2.1');
    const { doc } = parse(await issuer.issue(userData, verifierNonce));
    const extraData = sha256(userData, verifierNonce);
    expect(Buffer.from(seen[0] as Uint8Array).equals(extraData)).toBe(true);
    expect(b(doc.InstanceInfo as string).equals(info)).toBe(true);
    const [q] = doc.Attestation.quotes;
    const tpmNonce = sha256(info, extraData);
    expect(extraDataOf(b(q?.quote ?? '')).equals(tpmNonce)).toBe(true);
    expect(Buffer.from(makeTpmNonce(info, makeExtraData(userData, verifierNonce))).equals(tpmNonce)).toBe(
      true,
    );
    const pem = rsaAkPem(b(doc.Attestation.ak_pub));
    expect(await checkQuote(tmp(), pem, b(q?.quote ?? ''), b(q?.raw_sig ?? ''), tpmNonce)).toBe(true);
    expect(await checkQuote(tmp(), pem, b(q?.quote ?? ''), b(q?.raw_sig ?? ''), sha256(extraData))).toBe(
      false,
    );
  });

  it('includes the event log read from a file, and names the file when it is missing', async () => {
    const s = await swtpm();
    const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
    const log = join(tmp(), 'binary_bios_measurements');
    writeFileSync(log, Buffer.from([3, 0, 0, 0, 1, 2, 3]));
    const { doc, text } = parse(
      await createQemuVtpmIssuer(tpm, { eventLogPath: log }).issue(userData, verifierNonce),
    );
    expect(doc.Attestation.event_log).toBe('AwAAAAECAw==');
    expect(text).toMatch(/\],"event_log":"AwAAAAECAw==","TeeAttestation":null\}/);
    await expect(
      createQemuVtpmIssuer(tpm, { eventLogPath: `${log}.missing` }).issue(userData, verifierNonce),
    ).rejects.toThrow(/^issuing qemu-vtpm attestation: reading TCG event log .*\.missing/);
  });

  it('quotes only the configured PCRs', async () => {
    const s = await swtpm();
    const issuer = createQemuVtpmIssuer(new Tpm2ToolsTpm({ tcti: s.tcti }), { pcrs: [4, 15, 9] });
    const { doc } = parse(await issuer.issue(userData, verifierNonce));
    expect(Object.keys(doc.Attestation.quotes[0]?.pcrs.pcrs ?? {}).sort()).toEqual(['15', '4', '9']);
  });

  it('adds a SHA-1 quote first when asked, both over the same TPM nonce', async () => {
    const s = await swtpm();
    const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
    const { doc, text } = parse(
      await createQemuVtpmIssuer(tpm, { sha1Quoter: tpm }).issue(userData, verifierNonce),
    );
    expect(doc.Attestation.quotes.map((q) => q.pcrs.hash)).toEqual([4, 11]);
    expect(text).toMatch(/"quotes":\[\{"quote":"[^"]+","raw_sig":"[^"]+","pcrs":\{"hash":4,"pcrs":\{"0":"/);
    const tpmNonce = sha256(sha256(userData, verifierNonce));
    const pem = rsaAkPem(b(doc.Attestation.ak_pub));
    for (const q of doc.Attestation.quotes) {
      expect(extraDataOf(b(q.quote)).equals(tpmNonce)).toBe(true);
      expect(await checkQuote(tmp(), pem, b(q.quote), b(q.raw_sig), tpmNonce)).toBe(true);
    }
    expect(b(doc.Attestation.quotes[0]?.pcrs.pcrs['0'] ?? '').length).toBe(20);
    expect(b(doc.Attestation.quotes[1]?.pcrs.pcrs['0'] ?? '').length).toBe(32);
  });

  it('refuses non-vTPM variants and wraps TPM failures with the variant', async () => {
    const s = await swtpm();
    await s.stop();
    const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
    expect(() => new VtpmIssuer({ variant: 'dummy' as never, oid: DUMMY_OID, tpm })).toThrow(
      /unsupported variant dummy/,
    );
    expect(() => new VtpmIssuer({ variant: 'qemu-tdx' as never, oid: variantOid('qemu-tdx'), tpm })).toThrow(
      /unsupported variant qemu-tdx/,
    );
    await expect(createQemuVtpmIssuer(tpm).issue(userData, verifierNonce)).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringMatching(
        /^issuing qemu-vtpm attestation: loading attestation key .*tpm2_getcap failed/s,
      ),
    });
  });
});
