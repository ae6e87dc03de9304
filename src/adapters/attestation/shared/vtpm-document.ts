/**
 * The go-tpm-tools `attest.Attestation` message (docs/upstream.md) in its two
 * encodings: the raw protobuf (ak_pub=1, quotes=2 {quote=1, raw_sig=2, pcrs=3 {hash=1, map pcrs=2}},
 * event_log=3, ak_cert=6, intermediate_certs=7), decoded by hand with @bufbuild/protobuf's wire
 * reader; and upstream's Go-JSON attestation document
 * `{"Attestation": {...}, "InstanceInfo": b64|null, "UserData": b64}` that vTPM variants send in
 * attested TLS. Both sides (issuer and validator) use these codecs.
 */
import { BinaryReader, BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { AttestationError, messageOf } from '../../../ports/errors.js';

/** One quote of one PCR bank (go-tpm-tools `tpm.Quote`). */
export interface AttestationQuote {
  /** TPMS_ATTEST bytes. */
  quote: Uint8Array;
  /** TPMT_SIGNATURE bytes. */
  rawSig: Uint8Array;
  /** The bank (go-tpm-tools HashAlgo = TPM_ALG_ID: SHA1=4, SHA256=11, SHA384=12, SHA512=13). */
  pcrHashAlg: number;
  /** PCR values by index. */
  pcrs: Map<number, Uint8Array>;
}

/** The subset of go-tpm-tools `attest.Attestation` confboot reads and writes. */
export interface TpmAttestation {
  /** TPMT_PUBLIC of the attestation key. */
  akPub: Uint8Array;
  quotes: AttestationQuote[];
  /** Raw TCG event log; empty when absent. */
  eventLog: Uint8Array;
  /** DER AK certificate; empty when absent. */
  akCert: Uint8Array;
  /** DER intermediates for the AK certificate. */
  intermediateCerts: Uint8Array[];
}

/** upstream's `vtpm.AttestationDocument`. */
export interface VtpmDocument {
  attestation: TpmAttestation;
  /** Variant-specific instance info (raw JSON bytes), or undefined for Go nil. */
  instanceInfo: Uint8Array | undefined;
  userData: Uint8Array;
}

const MAX_PCR_INDEX = 31;

function formatError(what: string, message: string, cause?: unknown): AttestationError {
  return new AttestationError('document-format', `decoding ${what}: ${message}`, { cause });
}

function decodePcrs(buf: Uint8Array): { hash: number; pcrs: Map<number, Uint8Array> } {
  const r = new BinaryReader(buf);
  let hash = 0;
  const pcrs = new Map<number, Uint8Array>();
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.Varint) hash = r.int32();
    else if (no === 2 && wt === WireType.LengthDelimited) {
      const e = new BinaryReader(r.bytes());
      let key = 0;
      let value: Uint8Array = new Uint8Array();
      while (e.pos < e.len) {
        const [eno, ewt] = e.tag();
        if (eno === 1 && ewt === WireType.Varint) key = e.uint32();
        else if (eno === 2 && ewt === WireType.LengthDelimited) value = e.bytes();
        else e.skip(ewt, eno);
      }
      if (key > MAX_PCR_INDEX) throw formatError('PCRs', `PCR index ${key} out of range`);
      if (pcrs.has(key)) throw formatError('PCRs', `PCR ${key} given twice`);
      pcrs.set(key, value);
    } else r.skip(wt, no);
  }
  return { hash, pcrs };
}

function decodeQuote(buf: Uint8Array): AttestationQuote {
  const r = new BinaryReader(buf);
  const q: AttestationQuote = {
    quote: new Uint8Array(),
    rawSig: new Uint8Array(),
    pcrHashAlg: 0,
    pcrs: new Map(),
  };
  let sawPcrs = false;
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.LengthDelimited) q.quote = r.bytes();
    else if (no === 2 && wt === WireType.LengthDelimited) q.rawSig = r.bytes();
    else if (no === 3 && wt === WireType.LengthDelimited) {
      const p = decodePcrs(r.bytes());
      q.pcrHashAlg = p.hash;
      q.pcrs = p.pcrs;
      sawPcrs = true;
    } else r.skip(wt, no);
  }
  if (!sawPcrs) throw formatError('quote', 'quote has no PCRs');
  return q;
}

/**
 * Decodes a raw go-tpm-tools `Attestation` protobuf. Unknown fields (instance_info, the TEE
 * attestations, canonical_event_log) are skipped.
 * @throws AttestationError (`document-format`) on malformed protobuf
 */
export function decodeAttestationPb(buf: Uint8Array): TpmAttestation {
  const att: TpmAttestation = {
    akPub: new Uint8Array(),
    quotes: [],
    eventLog: new Uint8Array(),
    akCert: new Uint8Array(),
    intermediateCerts: [],
  };
  try {
    const r = new BinaryReader(buf);
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      if (wt === WireType.LengthDelimited && no === 1) att.akPub = r.bytes();
      else if (wt === WireType.LengthDelimited && no === 2) att.quotes.push(decodeQuote(r.bytes()));
      else if (wt === WireType.LengthDelimited && no === 3) att.eventLog = r.bytes();
      else if (wt === WireType.LengthDelimited && no === 6) att.akCert = r.bytes();
      else if (wt === WireType.LengthDelimited && no === 7) att.intermediateCerts.push(r.bytes());
      else r.skip(wt, no);
    }
  } catch (err) {
    if (err instanceof AttestationError) throw err;
    throw formatError('go-tpm-tools Attestation protobuf', messageOf(err), err);
  }
  return att;
}

/** Encodes `att` as a go-tpm-tools `Attestation` protobuf (map entries in ascending PCR order). */
export function encodeAttestationPb(att: TpmAttestation): Uint8Array {
  const w = new BinaryWriter();
  if (att.akPub.length) w.tag(1, WireType.LengthDelimited).bytes(att.akPub);
  for (const q of att.quotes) {
    w.tag(2, WireType.LengthDelimited).fork();
    if (q.quote.length) w.tag(1, WireType.LengthDelimited).bytes(q.quote);
    if (q.rawSig.length) w.tag(2, WireType.LengthDelimited).bytes(q.rawSig);
    w.tag(3, WireType.LengthDelimited).fork();
    if (q.pcrHashAlg) w.tag(1, WireType.Varint).int32(q.pcrHashAlg);
    for (const [k, v] of [...q.pcrs].sort((a, b) => a[0] - b[0])) {
      w.tag(2, WireType.LengthDelimited)
        .fork()
        .tag(1, WireType.Varint)
        .uint32(k)
        .tag(2, WireType.LengthDelimited)
        .bytes(v)
        .join();
    }
    w.join().join();
  }
  if (att.eventLog.length) w.tag(3, WireType.LengthDelimited).bytes(att.eventLog);
  if (att.akCert.length) w.tag(6, WireType.LengthDelimited).bytes(att.akCert);
  for (const c of att.intermediateCerts) w.tag(7, WireType.LengthDelimited).bytes(c);
  return w.finish();
}

// ---- Go JSON (encoding/json of upstream's structs; []byte = std base64 with padding) ----

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');

function strictB64(v: unknown, field: string): Uint8Array {
  if (typeof v !== 'string') throw formatError('attestation document', `${field} is not a base64 string`);
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(v) || v.length % 4 !== 0)
    throw formatError('attestation document', `${field} is not standard base64`);
  // The Buffer is a Uint8Array already; no copy (27 fields per document, bench/analysis.md P5).
  return Buffer.from(v, 'base64');
}

function optB64(v: unknown, field: string): Uint8Array {
  return v === undefined || v === null ? new Uint8Array() : strictB64(v, field);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function quoteFromJson(v: unknown, i: number): AttestationQuote {
  if (!isObject(v)) throw formatError('attestation document', `quotes[${i}] is not an object`);
  const pcrsObj = v.pcrs;
  if (!isObject(pcrsObj)) throw formatError('attestation document', `quotes[${i}].pcrs is missing`);
  const hash = pcrsObj.hash ?? 0;
  if (typeof hash !== 'number' || !Number.isInteger(hash) || hash < 0)
    throw formatError('attestation document', `quotes[${i}].pcrs.hash is not an enum number`);
  const pcrs = new Map<number, Uint8Array>();
  const map = pcrsObj.pcrs ?? {};
  if (!isObject(map)) throw formatError('attestation document', `quotes[${i}].pcrs.pcrs is not an object`);
  for (const [k, val] of Object.entries(map)) {
    if (!/^(0|[1-9][0-9]?)$/.test(k) || Number(k) > MAX_PCR_INDEX)
      throw formatError(
        'attestation document',
        `quotes[${i}].pcrs.pcrs key ${JSON.stringify(k)} is not a PCR index`,
      );
    pcrs.set(Number(k), strictB64(val, `quotes[${i}].pcrs.pcrs[${k}]`));
  }
  return {
    quote: optB64(v.quote, `quotes[${i}].quote`),
    rawSig: optB64(v.raw_sig, `quotes[${i}].raw_sig`),
    pcrHashAlg: hash,
    pcrs,
  };
}

/**
 * Parses upstream's Go-JSON vTPM attestation document.
 * @throws AttestationError (`document-format`) when it is not such a document
 */
export function decodeVtpmDocument(raw: Uint8Array): VtpmDocument {
  let doc: unknown;
  try {
    // A view, not a copy, of the document bytes.
    doc = JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8'));
  } catch (err) {
    throw formatError('attestation document', `invalid JSON: ${messageOf(err)}`, err);
  }
  if (!isObject(doc)) throw formatError('attestation document', 'not a JSON object');
  const a = doc.Attestation;
  if (!isObject(a)) throw formatError('attestation document', 'Attestation is missing');
  const quotes = a.quotes ?? [];
  if (!Array.isArray(quotes)) throw formatError('attestation document', 'Attestation.quotes is not an array');
  const inter = a.intermediate_certs ?? [];
  if (!Array.isArray(inter))
    throw formatError('attestation document', 'Attestation.intermediate_certs is not an array');
  const attestation: TpmAttestation = {
    akPub: optB64(a.ak_pub, 'Attestation.ak_pub'),
    quotes: quotes.map(quoteFromJson),
    eventLog: optB64(a.event_log, 'Attestation.event_log'),
    akCert: optB64(a.ak_cert, 'Attestation.ak_cert'),
    intermediateCerts: inter.map((c, i) => strictB64(c, `Attestation.intermediate_certs[${i}]`)),
  };
  const instanceInfo =
    doc.InstanceInfo === undefined || doc.InstanceInfo === null
      ? undefined
      : strictB64(doc.InstanceInfo, 'InstanceInfo');
  const userData = optB64(doc.UserData, 'UserData');
  return { attestation, instanceInfo, userData };
}

/**
 * Encodes a document as upstream's Go JSON: struct field order, `omitempty` protobuf tags, PCR map
 * keys sorted as strings (as encoding/json sorts map keys; a JS object would reorder integer keys, so
 * the JSON is assembled by hand), `"TeeAttestation": null`.
 */
export function encodeVtpmDocument(doc: VtpmDocument): Uint8Array {
  const a = doc.attestation;
  const str = (b: Uint8Array) => JSON.stringify(b64(b));
  const att: string[] = [];
  if (a.akPub.length) att.push(`"ak_pub":${str(a.akPub)}`);
  if (a.quotes.length) {
    const qs = a.quotes.map((q) => {
      const o: string[] = [];
      if (q.quote.length) o.push(`"quote":${str(q.quote)}`);
      if (q.rawSig.length) o.push(`"raw_sig":${str(q.rawSig)}`);
      const p: string[] = [];
      if (q.pcrHashAlg) p.push(`"hash":${q.pcrHashAlg}`);
      if (q.pcrs.size) {
        const keys = [...q.pcrs.keys()].map(String).sort();
        p.push(`"pcrs":{${keys.map((k) => `"${k}":${str(q.pcrs.get(Number(k)) as Uint8Array)}`).join(',')}}`);
      }
      o.push(`"pcrs":{${p.join(',')}}`);
      return `{${o.join(',')}}`;
    });
    att.push(`"quotes":[${qs.join(',')}]`);
  }
  if (a.eventLog.length) att.push(`"event_log":${str(a.eventLog)}`);
  if (a.akCert.length) att.push(`"ak_cert":${str(a.akCert)}`);
  if (a.intermediateCerts.length)
    att.push(`"intermediate_certs":[${a.intermediateCerts.map(str).join(',')}]`);
  att.push('"TeeAttestation":null');
  const info = doc.instanceInfo === undefined ? 'null' : str(doc.instanceInfo);
  return new TextEncoder().encode(
    `{"Attestation":{${att.join(',')}},"InstanceInfo":${info},"UserData":${str(doc.userData)}}`,
  );
}
