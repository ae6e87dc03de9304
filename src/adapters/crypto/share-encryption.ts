/**
 * Encrypting a recovery share file to one holder's X25519 public key (ECIES with node:crypto):
 * a fresh ephemeral X25519 key per file, the shared secret through HKDF-SHA256 (salt: both public
 * keys, info `confboot recovery share v1`) to an AES-256-GCM key, a random 12-byte nonce; the
 * clear header (type, index, K, N, cluster ID, recipient key digest) is the additional data, so it
 * cannot be altered without the decryption failing. Only the holder's private key opens the file.
 */
import {
  createCipheriv,
  createDecipheriv,
  createHash,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  type KeyObject,
  randomBytes,
} from 'node:crypto';
import { ConfbootError, messageOf } from '../../ports/errors.js';

/** `type` of an encrypted share file. */
export const ENCRYPTED_SHARE_TYPE = 'confboot-recovery-share-encrypted';
const INFO = 'confboot recovery share v1';

interface EncryptedShareHeader {
  type: typeof ENCRYPTED_SHARE_TYPE;
  version: 1;
  index: number;
  threshold: number;
  shares: number;
  clusterId: string;
  /** SHA-256 (hex) of the recipient's public key (SPKI DER). */
  recipient: string;
  /** The ephemeral public key, SPKI DER in base64. */
  ephemeralPublicKey: string;
}

function spki(key: KeyObject): Buffer {
  return key.export({ type: 'spki', format: 'der' });
}

function aeadKey(shared: Buffer, ephemeral: Buffer, recipient: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.concat([ephemeral, recipient]), INFO, 32));
}

function x25519Public(pem: string | Uint8Array): KeyObject {
  let key: KeyObject;
  try {
    key = createPublicKey(typeof pem === 'string' ? pem : Buffer.from(pem));
  } catch (err) {
    throw new ConfbootError('invalid-argument', `reading holder public key: ${messageOf(err)}`);
  }
  if (key.asymmetricKeyType !== 'x25519')
    throw new ConfbootError('invalid-argument', `holder public key is ${key.asymmetricKeyType}, want x25519`);
  return key;
}

/** Whether `file` is an encrypted share file (by its `type`). */
export function isEncryptedShare(file: Uint8Array): boolean {
  try {
    return (JSON.parse(new TextDecoder().decode(file)) as { type?: unknown }).type === ENCRYPTED_SHARE_TYPE;
  } catch {
    return false;
  }
}

/** Encrypts the share file `plain` (JSON) to the X25519 public key in `recipientPem`. */
export function encryptShare(plain: Uint8Array, recipientPem: string | Uint8Array): Uint8Array {
  const recipient = x25519Public(recipientPem);
  const parsed = JSON.parse(new TextDecoder().decode(plain)) as Record<string, unknown>;
  const ephemeral = generateKeyPairSync('x25519');
  const recipientDer = spki(recipient);
  const ephemeralDer = spki(ephemeral.publicKey);
  const header: EncryptedShareHeader = {
    type: ENCRYPTED_SHARE_TYPE,
    version: 1,
    index: Number(parsed.index),
    threshold: Number(parsed.threshold),
    shares: Number(parsed.shares),
    clusterId: String(parsed.clusterId),
    recipient: createHash('sha256').update(recipientDer).digest('hex'),
    ephemeralPublicKey: ephemeralDer.toString('base64'),
  };
  const shared = diffieHellman({ privateKey: ephemeral.privateKey, publicKey: recipient });
  const key = aeadKey(shared, ephemeralDer, recipientDer);
  const nonce = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, nonce);
  cipher.setAAD(Buffer.from(JSON.stringify(header)));
  const ciphertext = Buffer.concat([cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  key.fill(0);
  shared.fill(0);
  return new TextEncoder().encode(
    `${JSON.stringify({ ...header, nonce: nonce.toString('base64'), ciphertext: ciphertext.toString('base64') }, null, 2)}\n`,
  );
}

/**
 * Decrypts an encrypted share file with the holder's X25519 private key (PEM). Throws
 * `permission-denied` when the file was not made for this key or was altered.
 */
export function decryptShare(file: Uint8Array, privatePem: string | Uint8Array): Uint8Array {
  let o: EncryptedShareHeader & { nonce?: unknown; ciphertext?: unknown };
  try {
    o = JSON.parse(new TextDecoder().decode(file));
  } catch {
    throw new ConfbootError('invalid-argument', 'encrypted share: not JSON');
  }
  if (o.type !== ENCRYPTED_SHARE_TYPE || typeof o.nonce !== 'string' || typeof o.ciphertext !== 'string')
    throw new ConfbootError('invalid-argument', 'encrypted share: not an encrypted share file');
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey(typeof privatePem === 'string' ? privatePem : Buffer.from(privatePem));
  } catch (err) {
    throw new ConfbootError('invalid-argument', `reading holder private key: ${messageOf(err)}`);
  }
  if (privateKey.asymmetricKeyType !== 'x25519')
    throw new ConfbootError('invalid-argument', 'holder private key is not x25519');
  const recipientDer = spki(createPublicKey(privateKey));
  if (createHash('sha256').update(recipientDer).digest('hex') !== o.recipient)
    throw new ConfbootError('permission-denied', 'encrypted share: made for another holder key');
  const header: EncryptedShareHeader = {
    type: o.type,
    version: o.version,
    index: o.index,
    threshold: o.threshold,
    shares: o.shares,
    clusterId: o.clusterId,
    recipient: o.recipient,
    ephemeralPublicKey: o.ephemeralPublicKey,
  };
  const ephemeralDer = Buffer.from(String(o.ephemeralPublicKey), 'base64');
  const ciphertext = Buffer.from(o.ciphertext, 'base64');
  if (ciphertext.length < 16)
    throw new ConfbootError('invalid-argument', 'encrypted share: ciphertext too short');
  try {
    const shared = diffieHellman({
      privateKey,
      publicKey: createPublicKey({ key: ephemeralDer, format: 'der', type: 'spki' }),
    });
    const key = aeadKey(shared, ephemeralDer, recipientDer);
    const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(o.nonce, 'base64'));
    decipher.setAAD(Buffer.from(JSON.stringify(header)));
    decipher.setAuthTag(ciphertext.subarray(ciphertext.length - 16));
    const plain = Buffer.concat([
      decipher.update(ciphertext.subarray(0, ciphertext.length - 16)),
      decipher.final(),
    ]);
    key.fill(0);
    shared.fill(0);
    return new Uint8Array(plain);
  } catch {
    throw new ConfbootError(
      'permission-denied',
      'encrypted share: decryption failed (altered, or another key)',
    );
  }
}
