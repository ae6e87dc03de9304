/**
 * The join service's receipt key (adapter, JOSE through `jose`): an ECDSA P-256 private key in a
 * PKCS#8 PEM file that signs join receipts as ES256 JWTs, and the JWKS that publishes its public
 * half (plus retired public keys during a rotation). Every replica loads the same file (a Kubernetes
 * Secret), so receipts verify against one JWKS whichever replica signed them and across restarts.
 * The key ID is the key's RFC 7638 JWK thumbprint (SHA-256, base64url), so it follows from the key
 * alone and a verifier can check that a published key carries its own kid. Signatures are written
 * in low-S form (ecdsa-low-s.ts), so each receipt has exactly one valid token.
 */
import {
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
  randomBytes,
} from 'node:crypto';
import { link, readFile, unlink, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { calculateJwkThumbprint, exportJWK, type JWK, SignJWT } from 'jose';
import { messageOf } from '../../ports/errors.js';
import type { ReceiptClaims, ReceiptSigner } from '../../ports/receipt-signer.js';
import { readFilePrefix } from '../fs/read-prefix.js';
import { compactJwsToLowS } from './ecdsa-low-s.js';

/** The one algorithm receipts are signed and verified with. */
export const RECEIPT_ALG = 'ES256';

/** Largest key or JWKS file read. */
const MAX_KEY_FILE_BYTES = 64 * 1024;

/** A JSON Web Key Set. */
export interface JsonWebKeySet {
  keys: JWK[];
}

/** A new receipt key: an ECDSA P-256 private key as PKCS#8 PEM (what {@link ReceiptKey.load} reads). */
export function generateReceiptKeyPem(): string {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  return privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
}

/** A loaded receipt key: signs receipts and publishes the JWKS. */
export class ReceiptKey implements ReceiptSigner {
  private constructor(
    private readonly privateKey: KeyObject,
    readonly keyId: string,
    private readonly publicJwk: JWK,
    private readonly retired: readonly JWK[],
  ) {}

  /** Builds a receipt key from a private key (P-256), with retired public keys still published. */
  static async fromKeyObject(privateKey: KeyObject, retired: readonly JWK[] = []): Promise<ReceiptKey> {
    if (privateKey.type !== 'private' || privateKey.asymmetricKeyDetails?.namedCurve !== 'prime256v1')
      throw new Error('the receipt key must be an ECDSA P-256 private key');
    const pub = await exportJWK(createPublicKey(privateKey));
    const kid = await calculateJwkThumbprint(pub, 'sha256');
    const publicJwk: JWK = {
      kty: pub.kty,
      crv: pub.crv,
      x: pub.x,
      y: pub.y,
      kid,
      alg: RECEIPT_ALG,
      use: 'sig',
    };
    return new ReceiptKey(
      privateKey,
      kid,
      publicJwk,
      retired.filter((k) => k.kid !== kid),
    );
  }

  /**
   * Loads the key from a PKCS#8 PEM file (`-----BEGIN PRIVATE KEY-----`, P-256). With
   * `retiredJwksPath`, the public keys of that JWKS file are published too (rotation).
   * @throws naming the file (never its content) when it is missing, unreadable or not a P-256 key
   */
  static async load(path: string, options: { retiredJwksPath?: string } = {}): Promise<ReceiptKey> {
    let key: KeyObject;
    try {
      const pem = await readFile(path);
      if (pem.length > MAX_KEY_FILE_BYTES) throw new Error(`larger than ${MAX_KEY_FILE_BYTES} bytes`);
      key = createPrivateKey({ key: pem, format: 'pem' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT')
        throw new MissingReceiptKeyError(`loading receipt key ${path}: no such file`);
      throw new Error(`loading receipt key ${path}: ${keyErrorOf(err)}`);
    }
    const retired =
      options.retiredJwksPath === undefined ? [] : (await readJwksFile(options.retiredJwksPath)).keys;
    try {
      return await ReceiptKey.fromKeyObject(key, retired);
    } catch (err) {
      throw new Error(`loading receipt key ${path}: ${messageOf(err)}`);
    }
  }

  /**
   * Loads the key at `path`, creating a new P-256 key there first when the file does not exist
   * (mode 0600; created under a temporary name and linked into place, so two processes never both
   * create one and nobody reads half a key). For the demo and tests; production mounts a Secret.
   */
  static async loadOrGenerate(path: string): Promise<ReceiptKey> {
    try {
      return await ReceiptKey.load(path);
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
    const tmp = join(dirname(path), `.receipt-key-${randomBytes(8).toString('hex')}.tmp`);
    await writeFile(tmp, generateReceiptKeyPem(), { mode: 0o600, flag: 'wx' });
    try {
      await link(tmp, path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    } finally {
      await unlink(tmp);
    }
    return ReceiptKey.load(path);
  }

  /** Signs `claims` as a compact ES256 JWT with header `kid` and `typ: JWT`, its signature low-S. */
  async sign(claims: ReceiptClaims): Promise<string> {
    const token = await new SignJWT(claims as unknown as Record<string, unknown>)
      .setProtectedHeader({ alg: RECEIPT_ALG, kid: this.keyId, typ: 'JWT' })
      .sign(this.privateKey);
    return compactJwsToLowS(token);
  }

  /** The JWKS to publish: this key's public half first, then the retired public keys. */
  jwks(): JsonWebKeySet {
    return { keys: [{ ...this.publicJwk }, ...this.retired.map((k) => ({ ...k }))] };
  }
}

/**
 * The public JWKS of a receipt key given as PKCS#8 PEM (the content of its Secret): what the join
 * service loading that key publishes, without retired keys. The PEM is neither kept nor echoed.
 * @throws when it is not a P-256 private key (without quoting it)
 */
export async function receiptJwksFromPem(pem: string | Buffer): Promise<JsonWebKeySet> {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (err) {
    throw new Error(`reading the receipt key: ${keyErrorOf(err)}`);
  }
  return (await ReceiptKey.fromKeyObject(key)).jwks();
}

/** The receipt key file does not exist. */
class MissingReceiptKeyError extends Error {
  override readonly name = 'MissingReceiptKeyError';
}

function isMissing(err: unknown): boolean {
  return err instanceof MissingReceiptKeyError;
}

/** Why a key file could not be loaded, without quoting the file (key parsers may echo input). */
function keyErrorOf(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'EACCES') return 'permission denied';
  if (code === 'EISDIR') return 'is a directory';
  return 'not a PEM private key';
}

/**
 * Reads and checks a JWKS file: JSON `{"keys": [...]}` with EC P-256 public keys only (a private
 * member `d` is refused, so a private key is never published by mistake).
 */
export async function readJwksFile(path: string): Promise<JsonWebKeySet> {
  let text: string;
  try {
    const buf = await readFilePrefix(path, MAX_KEY_FILE_BYTES);
    if (buf.length > MAX_KEY_FILE_BYTES) throw new Error(`larger than ${MAX_KEY_FILE_BYTES} bytes`);
    text = buf.toString('utf8');
  } catch (err) {
    throw new Error(`reading JWKS ${path}: ${messageOf(err)}`);
  }
  try {
    return parseJwks(text);
  } catch (err) {
    throw new Error(`reading JWKS ${path}: ${messageOf(err)}`);
  }
}

/** Parses and checks a JWKS document (see {@link readJwksFile}). */
export function parseJwks(text: string): JsonWebKeySet {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error('not JSON');
  }
  const keys = (doc as { keys?: unknown }).keys;
  if (typeof doc !== 'object' || doc === null || !Array.isArray(keys))
    throw new Error('not a JWKS (want {"keys": [...]})');
  keys.forEach((k: unknown, i) => {
    const jwk = k as JWK;
    if (typeof k !== 'object' || k === null || jwk.kty !== 'EC' || jwk.crv !== 'P-256')
      throw new Error(`key ${i} is not an EC P-256 key`);
    if ('d' in jwk) throw new Error(`key ${i} holds a private key; publish public keys only`);
  });
  return { keys: keys as JWK[] };
}
