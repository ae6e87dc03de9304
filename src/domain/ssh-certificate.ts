/**
 * OpenSSH certificates (PROTOCOL.certkeys, version v01), encoded and signed here with node:crypto:
 * the emergency SSH CA signs host certificates for joining nodes and short-lived user certificates
 * for operators. The encoding is the signed key's type with `-cert-v01`, a nonce, the key's own
 * fields, serial, type (1 user, 2 host), key ID, principals, validity, critical options,
 * extensions, an empty reserved field, the CA's public key, and the CA's signature over all of it.
 */
import { type KeyObject, sign } from 'node:crypto';
import { ConfbootError } from '../ports/errors.js';
import { certificateTypeOf, type SshPublicKey } from './ssh-keys.js';
import { SshReader, SshWriter } from './ssh-wire.js';

/** `valid before` of a certificate that never expires (upstream `ssh.CertTimeInfinity`). */
export const CERT_TIME_INFINITY = 2n ** 64n - 1n;

/** Length of a certificate nonce in bytes (OpenSSH and Go use 32). */
export const CERT_NONCE_LENGTH = 32;

/** Whom a certificate is for: a user logging in, or a host proving its name. */
export type SshCertType = 'user' | 'host';

const CERT_TYPE_CODE: Readonly<Record<SshCertType, number>> = { user: 1, host: 2 };

/** What a certificate says; the CA adds its key and signature. */
export interface SshCertificateFields {
  /** The key being certified. */
  key: SshPublicKey;
  certType: SshCertType;
  /** Shown in sshd's log on every login with the certificate. */
  keyId: string;
  /** Users or host names the certificate is valid for; OpenSSH reads none as "any", so at least one. */
  principals: readonly string[];
  /** Unix seconds. */
  validAfter: bigint;
  /** Unix seconds; {@link CERT_TIME_INFINITY} for no end. */
  validBefore: bigint;
  /** {@link CERT_NONCE_LENGTH} random bytes. */
  nonce: Uint8Array;
  /** Default 0. */
  serial?: bigint;
  /** Name → value; an empty value is encoded as an empty field (flag options). */
  criticalOptions?: Readonly<Record<string, string>>;
  /** Name → value, as critical options; user certificates grant e.g. `permit-pty`. */
  extensions?: Readonly<Record<string, string>>;
}

/** The signing half of an Ed25519 CA. */
export interface SshCaKey {
  /** The CA's public key (`ssh-ed25519`). */
  publicKey: SshPublicKey;
  /** The CA's private Ed25519 key. */
  privateKey: KeyObject;
}

/** Options or extensions, sorted by name as PROTOCOL.certkeys requires. */
function tuples(entries: Readonly<Record<string, string>> | undefined): Uint8Array {
  const w = new SshWriter();
  for (const name of Object.keys(entries ?? {}).sort()) {
    const value = (entries as Record<string, string>)[name] as string;
    w.string(name).string(value === '' ? new Uint8Array(0) : new SshWriter().string(value).bytes());
  }
  return w.bytes();
}

/** Checks what a certificate must hold; throws `invalid-argument` naming the field. */
function checkFields(f: SshCertificateFields): void {
  const bad = (why: string) => new ConfbootError('invalid-argument', `SSH certificate: ${why}`);
  if (f.principals.length === 0) throw bad('no principals (OpenSSH would accept any name)');
  if (f.principals.some((p) => p === '' || /[\s,]/.test(p)))
    throw bad('a principal is empty or holds a space or comma');
  if (f.nonce.length !== CERT_NONCE_LENGTH) throw bad(`nonce of ${f.nonce.length} bytes`);
  if (f.validAfter < 0n || f.validBefore > CERT_TIME_INFINITY || f.validAfter >= f.validBefore)
    throw bad('validity window is empty');
}

/**
 * Signs an OpenSSH certificate for `fields.key` with the CA and returns its wire format. Throws
 * `invalid-argument` for no principals, a malformed principal, a nonce of another length, an
 * empty validity window, or a key that is itself a certificate.
 */
export function signSshCertificate(fields: SshCertificateFields, ca: SshCaKey): Uint8Array {
  checkFields(fields);
  const r = new SshReader(fields.key.blob, 'certified key');
  if (r.text() !== fields.key.type)
    throw new ConfbootError('invalid-argument', 'SSH certificate: the key does not start with its type');
  if (fields.key.type.includes('-cert-'))
    throw new ConfbootError('invalid-argument', 'SSH certificate: the key is itself a certificate');
  const principals = new SshWriter();
  for (const p of fields.principals) principals.string(p);
  const body = new SshWriter()
    .string(certificateTypeOf(fields.key.type))
    .string(fields.nonce)
    .raw(r.rest())
    .uint64(fields.serial ?? 0n)
    .uint32(CERT_TYPE_CODE[fields.certType])
    .string(fields.keyId)
    .string(principals.bytes())
    .uint64(fields.validAfter)
    .uint64(fields.validBefore)
    .string(tuples(fields.criticalOptions))
    .string(tuples(fields.extensions))
    .string(new Uint8Array(0))
    .string(ca.publicKey.blob)
    .bytes();
  const signature = new SshWriter()
    .string(ca.publicKey.type)
    .string(new Uint8Array(sign(null, body, ca.privateKey)))
    .bytes();
  return new SshWriter().raw(body).string(signature).bytes();
}

/** A certificate's authorized_keys-format line (`…-cert-v01@openssh.com base64`), with a newline. */
export function formatCertificate(cert: Uint8Array): string {
  const type = new SshReader(cert, 'SSH certificate').text();
  return `${type} ${Buffer.from(cert).toString('base64')}\n`;
}

/** Whole seconds since the Unix epoch of `date` (rounded down). */
export function unixSeconds(date: Date): bigint {
  return BigInt(Math.floor(date.getTime() / 1000));
}
