/**
 * AWS's NitroTPM attestation document: a CBOR COSE_Sign1 (RFC 9052) signed with ES384 by a leaf
 * certificate of the AWS Nitro attestation PKI. Its payload carries the instance's SHA-384 PCRs
 * (`nitrotpm_pcrs`), the `nonce`, `user_data` and `public_key` the requester gave, the signing
 * `certificate` and the `cabundle` (root first, then the intermediates down to the leaf's issuer).
 *
 * Verification (aws-nitro-tpm's validator and `confboot attestation verify-nitrotpm`):
 *   1. decode the COSE_Sign1; the protected header must be exactly `{1: -35}` (alg ES384);
 *   2. the signature (raw r‖s, 96 bytes) verifies over the Sig_structure
 *      `["Signature1", protected, h'', payload]` with SHA-384 and the leaf's P-384 key;
 *   3. `cabundle[0]` is the pinned root (by SHA-256 of its DER), self-signed; each following
 *      certificate is a CA signed by the one before it, the leaf is signed by the last; every
 *      certificate is valid at the given time (documents' leaves live three hours, so the time is an
 *      argument: the Clock, or an operator's `--at`);
 *   4. the `nonce` equals the expected one.
 * Only then are the payload's fields returned to the caller, who compares `public_key` and the PCRs.
 */
import { createHash, verify as cryptoVerify, type KeyObject, X509Certificate } from 'node:crypto';
import { decode, encode } from 'cbor2';
import { AttestationError, messageOf } from '../../../ports/errors.js';
import type { CheckRecorder } from './checks.js';

/**
 * SHA-256 of the DER of AWS's published Nitro attestation root (`CN=aws.nitro-enclaves`,
 * valid 2019-10-28 … 2049-10-28), the default trust anchor.
 */
export const AWS_NITRO_ROOT_SHA256 = '641a0321a3e244efe456463195d606317ed7cdcc3c1756e09893f3c68f79bb5b';

/** Documents larger than this are refused before decoding (a real one is about 5 KiB). */
export const MAX_NITROTPM_DOCUMENT_BYTES = 32 * 1024;

/** COSE algorithm ES384 (ECDSA with SHA-384). */
const COSE_ALG_ES384 = -35;
/** The exact protected header AWS signs: the CBOR map `{1: -35}`. */
const PROTECTED_ES384 = Buffer.from([0xa1, 0x01, 0x38, 0x22]);
const MAX_CABUNDLE = 8;
const MAX_OPTIONAL_FIELD = 1024;

/** The payload of a verified NitroTPM attestation document. */
export interface NitroTpmDocument {
  /** The NitroTPM's module ID, e.g. `i-0123…-tpm0000000000000000`. */
  moduleId: string;
  /** The PCR bank, always `SHA384`. */
  digest: string;
  /** When the Nitro system signed the document. */
  timestamp: Date;
  /** SHA-384 PCR values by index. */
  pcrs: Map<number, Uint8Array>;
  /** The signing certificate (DER). */
  certificate: Uint8Array;
  /** Root first, then the intermediates (DER). */
  cabundle: Uint8Array[];
  /** The public key the requester had bound (the TPM attestation key), if any. */
  publicKey: Uint8Array | undefined;
  /** The requester's user data, if any. */
  userData: Uint8Array | undefined;
  /** The requester's nonce, if any. */
  nonce: Uint8Array | undefined;
}

/** What {@link verifyNitroTpmDocument} checks against. */
export interface NitroTpmVerifyOptions {
  /** The time at which every certificate must be valid. */
  at: Date;
  /** The nonce the document must carry; undefined skips the check (only for inspection). */
  nonce: Uint8Array | undefined;
  /** Accepted roots by SHA-256 (hex) of their DER; default {@link AWS_NITRO_ROOT_SHA256} alone. */
  rootSha256?: readonly string[];
}

function formatError(message: string, cause?: unknown): AttestationError {
  return new AttestationError('nitrotpm-format', `NitroTPM document: ${message}`, { cause });
}

function isBytes(v: unknown): v is Uint8Array {
  return v instanceof Uint8Array;
}

function field(map: Map<unknown, unknown>, key: string): unknown {
  return map.get(key);
}

function optionalBytes(map: Map<unknown, unknown>, key: string): Uint8Array | undefined {
  const v = field(map, key);
  if (v === undefined || v === null) return undefined;
  if (!isBytes(v)) throw formatError(`${key} is not a byte string`);
  if (v.length > MAX_OPTIONAL_FIELD) throw formatError(`${key} has ${v.length} bytes, at most 1024 allowed`);
  return new Uint8Array(v);
}

/** The four parts of a COSE_Sign1 as they were encoded. */
interface CoseSign1 {
  protectedHeader: Uint8Array;
  payload: Uint8Array;
  signature: Uint8Array;
}

function decodeCbor(bytes: Uint8Array, what: string): unknown {
  try {
    return decode(bytes, { preferMap: true });
  } catch (err) {
    throw formatError(`${what} is not CBOR: ${messageOf(err)}`, err);
  }
}

/** Decodes the COSE_Sign1 envelope (tagged 18 or not). */
function decodeCoseSign1(bytes: Uint8Array): CoseSign1 {
  if (bytes.length > MAX_NITROTPM_DOCUMENT_BYTES)
    throw formatError(`${bytes.length} bytes, at most ${MAX_NITROTPM_DOCUMENT_BYTES} allowed`);
  let outer = decodeCbor(bytes, 'the document');
  if (outer && typeof outer === 'object' && 'tag' in outer && 'contents' in outer) {
    const tagged = outer as { tag: unknown; contents: unknown };
    if (tagged.tag !== 18) throw formatError(`CBOR tag ${String(tagged.tag)} is not COSE_Sign1 (18)`);
    outer = tagged.contents;
  }
  if (!Array.isArray(outer) || outer.length !== 4) throw formatError('not a COSE_Sign1 array of four');
  const [protectedHeader, unprotected, payload, signature] = outer as unknown[];
  if (!isBytes(protectedHeader) || !isBytes(payload) || !isBytes(signature))
    throw formatError('COSE_Sign1 protected header, payload and signature must be byte strings');
  if (!(unprotected instanceof Map)) throw formatError('COSE_Sign1 unprotected header is not a map');
  return { protectedHeader, payload, signature };
}

function checkProtectedHeader(protectedHeader: Uint8Array): void {
  if (Buffer.from(protectedHeader).equals(PROTECTED_ES384)) return;
  const header = decodeCbor(protectedHeader, 'the protected header');
  const alg = header instanceof Map ? header.get(1) : undefined;
  throw new AttestationError(
    'nitrotpm-signature',
    `NitroTPM document: protected header must be exactly {1: ${COSE_ALG_ES384}} (ES384), got alg ${String(alg)}`,
  );
}

function parsePayload(payload: Uint8Array): NitroTpmDocument {
  const map = decodeCbor(payload, 'the payload');
  if (!(map instanceof Map)) throw formatError('payload is not a map');
  const moduleId = field(map, 'module_id');
  if (typeof moduleId !== 'string' || moduleId.length === 0 || moduleId.length > 128)
    throw formatError('module_id is missing or not a short string');
  const digest = field(map, 'digest');
  if (digest !== 'SHA384') throw formatError(`digest is ${JSON.stringify(digest)}, want "SHA384"`);
  const timestamp = field(map, 'timestamp');
  if (typeof timestamp !== 'number' || !Number.isSafeInteger(timestamp) || timestamp <= 0)
    throw formatError('timestamp is not a positive integer (milliseconds)');
  const rawPcrs = field(map, 'nitrotpm_pcrs');
  if (!(rawPcrs instanceof Map) || rawPcrs.size === 0 || rawPcrs.size > 32)
    throw formatError('nitrotpm_pcrs is not a map of 1 to 32 PCRs');
  const pcrs = new Map<number, Uint8Array>();
  for (const [index, value] of rawPcrs) {
    if (typeof index !== 'number' || !Number.isInteger(index) || index < 0 || index > 31)
      throw formatError(`nitrotpm_pcrs has index ${String(index)}, want 0..31`);
    if (!isBytes(value) || value.length !== 48)
      throw formatError(`nitrotpm_pcrs[${index}] is not 48 bytes (SHA-384)`);
    pcrs.set(index, new Uint8Array(value));
  }
  const certificate = field(map, 'certificate');
  if (!isBytes(certificate) || certificate.length === 0) throw formatError('certificate is missing');
  const cabundle = field(map, 'cabundle');
  if (!Array.isArray(cabundle) || cabundle.length === 0 || cabundle.length > MAX_CABUNDLE)
    throw formatError(`cabundle is not a list of 1 to ${MAX_CABUNDLE} certificates`);
  if (!cabundle.every(isBytes)) throw formatError('cabundle holds something other than byte strings');
  return {
    moduleId,
    digest,
    timestamp: new Date(timestamp),
    pcrs,
    certificate: new Uint8Array(certificate),
    cabundle: cabundle.map((c) => new Uint8Array(c)),
    publicKey: optionalBytes(map, 'public_key'),
    userData: optionalBytes(map, 'user_data'),
    nonce: optionalBytes(map, 'nonce'),
  };
}

function loadCert(der: Uint8Array, what: string): X509Certificate {
  try {
    return new X509Certificate(Buffer.from(der));
  } catch (err) {
    throw new AttestationError('nitrotpm-certificate', `NitroTPM document: ${what} is not a certificate`, {
      cause: err,
    });
  }
}

/** The leaf's public key; undefined when the certificate carries one node:crypto cannot decode. */
function leafKey(der: Uint8Array): KeyObject | undefined {
  const leaf = loadCert(der, 'certificate');
  try {
    return leaf.publicKey;
  } catch {
    return undefined;
  }
}

function name(cert: X509Certificate): string {
  return `"${cert.subject.replaceAll('\n', ', ')}"`;
}

function checkValidAt(cert: X509Certificate, at: Date, what: string): void {
  const from = new Date(cert.validFrom);
  const to = new Date(cert.validTo);
  if (!(at >= from && at <= to))
    throw new AttestationError(
      'nitrotpm-certificate',
      `NitroTPM ${what} ${name(cert)} is not valid at ${at.toISOString()} (valid ${from.toISOString()} … ${to.toISOString()})`,
    );
}

function checkSignedBy(cert: X509Certificate, issuer: X509Certificate, what: string): void {
  let ok = false;
  try {
    ok = cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
  } catch {
    ok = false;
  }
  if (!ok)
    throw new AttestationError(
      'nitrotpm-certificate',
      `NitroTPM ${what} ${name(cert)} is not signed by ${name(issuer)}`,
    );
}

/**
 * Checks the chain `cabundle` → `certificate` against the pinned roots at `at`; returns the leaf.
 * @throws AttestationError `nitrotpm-certificate`
 */
function verifyChain(doc: NitroTpmDocument, at: Date, rootSha256: readonly string[]): X509Certificate {
  const bundle = doc.cabundle.map((der, i) => loadCert(der, `cabundle[${i}]`));
  const leaf = loadCert(doc.certificate, 'certificate');
  const root = bundle[0] as X509Certificate;
  const rootHash = createHash('sha256').update(root.raw).digest('hex');
  if (!rootSha256.includes(rootHash))
    throw new AttestationError(
      'nitrotpm-certificate',
      `NitroTPM cabundle[0] ${name(root)} (SHA-256 ${rootHash}) is not the pinned AWS Nitro root`,
    );
  checkSignedBy(root, root, 'root');
  checkValidAt(root, at, 'root');
  for (let i = 1; i < bundle.length; i++) {
    const cert = bundle[i] as X509Certificate;
    if (!cert.ca)
      throw new AttestationError('nitrotpm-certificate', `NitroTPM cabundle[${i}] ${name(cert)} is not a CA`);
    checkSignedBy(cert, bundle[i - 1] as X509Certificate, `cabundle[${i}]`);
    checkValidAt(cert, at, `cabundle[${i}]`);
  }
  checkSignedBy(leaf, bundle[bundle.length - 1] as X509Certificate, 'certificate');
  checkValidAt(leaf, at, 'certificate');
  return leaf;
}

/**
 * Verifies a NitroTPM attestation document (see the module comment) and returns its payload.
 * Records `nitrotpm-format`, `nitrotpm-signature`, `nitrotpm-certificate` and `nitrotpm-nonce`.
 * @throws AttestationError naming the failed check
 */
export function verifyNitroTpmDocument(
  bytes: Uint8Array,
  options: NitroTpmVerifyOptions,
  rec: CheckRecorder,
): NitroTpmDocument {
  const cose = rec.run(() => decodeCoseSign1(bytes));
  const doc = rec.run(() => parsePayload(cose.payload));
  rec.pass('nitrotpm-format', `COSE_Sign1 from ${doc.moduleId}, ${doc.pcrs.size} SHA-384 PCRs`);

  rec.run(() => checkProtectedHeader(cose.protectedHeader));
  const key = rec.run(() => leafKey(doc.certificate));
  if (key?.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'secp384r1')
    throw rec.fail('nitrotpm-signature', 'NitroTPM document: the signing certificate has no P-384 key');
  if (cose.signature.length !== 96)
    throw rec.fail(
      'nitrotpm-signature',
      `NitroTPM document: signature has ${cose.signature.length} bytes, want 96 (ES384 r‖s)`,
    );
  // Plain Uint8Arrays: cbor2 encodes a Node Buffer through its toJSON, not as a byte string.
  const toBeSigned = encode([
    'Signature1',
    new Uint8Array(cose.protectedHeader),
    new Uint8Array(0),
    new Uint8Array(cose.payload),
  ]);
  let ok = false;
  try {
    ok = cryptoVerify('sha384', toBeSigned, { key, dsaEncoding: 'ieee-p1363' }, cose.signature);
  } catch {
    ok = false;
  }
  if (!ok) throw rec.fail('nitrotpm-signature', 'NitroTPM document: the ES384 signature does not verify');
  rec.pass('nitrotpm-signature', 'ES384 signature by the document certificate verifies');

  rec.run(() => verifyChain(doc, options.at, options.rootSha256 ?? [AWS_NITRO_ROOT_SHA256]));
  rec.pass(
    'nitrotpm-certificate',
    `chain of ${doc.cabundle.length + 1} to the pinned AWS Nitro root, valid at ${options.at.toISOString()}`,
  );

  if (options.nonce !== undefined) {
    if (doc.nonce === undefined || !Buffer.from(doc.nonce).equals(Buffer.from(options.nonce)))
      throw rec.fail(
        'nitrotpm-nonce',
        `NitroTPM document nonce ${doc.nonce ? Buffer.from(doc.nonce).toString('hex') : '(none)'} is not the expected ${Buffer.from(options.nonce).toString('hex')}`,
      );
    rec.pass('nitrotpm-nonce', 'nonce matches');
  }
  return doc;
}
