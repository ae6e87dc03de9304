/**
 * SSH public keys for emergency SSH: a node's host key (join request field 4, SSH wire format) and
 * an operator's key (`confboot ssh --key`, an OpenSSH `.pub` line). Each key is checked field by
 * field for the types OpenSSH certifies (Ed25519, ECDSA on the NIST curves, RSA of at least 2048
 * bits, and the FIDO security-key variants `sk-…@openssh.com`) before a certificate is signed for
 * it; certificates, DSA and unknown types are refused.
 */
import { ConfbootError } from '../ports/errors.js';
import { SshReader, SshWriter } from './ssh-wire.js';

/** An SSH public key: its type name and its whole wire-format encoding (type included). */
export interface SshPublicKey {
  /** e.g. `ssh-ed25519`. */
  type: string;
  /** The wire format (`string type` followed by the type's fields), as in authorized_keys. */
  blob: Uint8Array;
}

/** Key type of the emergency SSH CA. */
export const SSH_ED25519 = 'ssh-ed25519';

/** Smallest RSA modulus certified, in bits (OpenSSH itself refuses less than 1024). */
export const MIN_RSA_BITS = 2048;

const ECDSA_POINT_BYTES: Readonly<Record<string, number>> = { nistp256: 65, nistp384: 97, nistp521: 133 };

/** Reads and checks the fields after the type name; throws `invalid-argument` naming what is wrong. */
function checkFields(type: string, r: SshReader, what: string): void {
  const bad = (why: string) => new ConfbootError('invalid-argument', `${what}: ${type} key ${why}`);
  const ed25519 = () => {
    if (r.string().length !== 32) throw bad('is not 32 bytes');
  };
  const ecdsa = (curve: string) => {
    if (r.text() !== curve) throw bad('names another curve');
    const q = r.string();
    if (q.length !== ECDSA_POINT_BYTES[curve] || q[0] !== 0x04) throw bad('has no uncompressed point');
  };
  const ecdsaType = /^ecdsa-sha2-(nistp256|nistp384|nistp521)$/.exec(type);
  if (type === SSH_ED25519) ed25519();
  else if (ecdsaType !== null) ecdsa(ecdsaType[1] as string);
  else if (type === 'ssh-rsa') {
    const e = r.string();
    const n = r.string();
    if (e.length === 0 || (e[0] as number) & 0x80) throw bad('has an invalid exponent');
    const modulus = n[0] === 0 ? n.subarray(1) : n;
    if ((n[0] as number) & 0x80 || modulus.length * 8 < MIN_RSA_BITS)
      throw bad(`has a modulus below ${MIN_RSA_BITS} bits`);
  } else if (type === 'sk-ssh-ed25519@openssh.com') {
    ed25519();
    r.text();
  } else if (type === 'sk-ecdsa-sha2-nistp256@openssh.com') {
    ecdsa('nistp256');
    r.text();
  } else {
    throw new ConfbootError('invalid-argument', `${what}: unsupported SSH key type ${JSON.stringify(type)}`);
  }
  r.end();
}

/**
 * Parses an SSH public key in wire format (`ssh.PublicKey.Marshal()`); `what` names it in errors.
 * Throws `invalid-argument` for a truncated or malformed encoding, trailing bytes, or a type that
 * is not certified (see the module comment).
 */
export function parseSshPublicKey(blob: Uint8Array, what = 'SSH public key'): SshPublicKey {
  if (blob.length === 0) throw new ConfbootError('invalid-argument', `${what}: empty`);
  const r = new SshReader(blob, what);
  const type = r.text();
  checkFields(type, r, what);
  return { type, blob: new Uint8Array(blob) };
}

/**
 * Parses one OpenSSH public key line (`type base64 [comment]`, as in `id_ed25519.pub`). Options
 * before the type (authorized_keys syntax) are not accepted. Throws `invalid-argument` when the
 * line is malformed or names another type than its key.
 */
export function parseAuthorizedKey(line: string, what = 'SSH public key'): SshPublicKey {
  const [type, data] = line.trim().split(/\s+/);
  if (type === undefined || data === undefined || !/^[A-Za-z0-9+/]+={0,2}$/.test(data))
    throw new ConfbootError('invalid-argument', `${what}: not an OpenSSH public key line ("type base64 …")`);
  const key = parseSshPublicKey(new Uint8Array(Buffer.from(data, 'base64')), what);
  if (key.type !== type)
    throw new ConfbootError('invalid-argument', `${what}: the line says ${type} but the key is ${key.type}`);
  return key;
}

/** The authorized_keys line of a key (`type base64`, plus ` comment` when given), with a newline. */
export function formatAuthorizedKey(key: SshPublicKey, comment?: string): string {
  const base = `${key.type} ${Buffer.from(key.blob).toString('base64')}`;
  return `${comment === undefined || comment === '' ? base : `${base} ${comment}`}\n`;
}

/** The wire format of a raw 32-byte Ed25519 public key. */
export function ed25519PublicKey(raw: Uint8Array): SshPublicKey {
  if (raw.length !== 32)
    throw new ConfbootError('invalid-argument', `Ed25519 public key: ${raw.length} bytes, need 32`);
  return { type: SSH_ED25519, blob: new SshWriter().string(SSH_ED25519).string(raw).bytes() };
}

/**
 * The certificate type of a key type (PROTOCOL.certkeys): `ssh-ed25519` →
 * `ssh-ed25519-cert-v01@openssh.com`, `sk-ssh-ed25519@openssh.com` →
 * `sk-ssh-ed25519-cert-v01@openssh.com`.
 */
export function certificateTypeOf(keyType: string): string {
  const at = keyType.indexOf('@');
  return at < 0 ? `${keyType}-cert-v01@openssh.com` : `${keyType.slice(0, at)}-cert-v01${keyType.slice(at)}`;
}
