/**
 * The emergency SSH CA. Every node trusts one Ed25519 CA per cluster, derived from the master
 * secret: its 32-byte seed is the data key `ca_emergency_ssh` (HKDF info `key-ca_emergency_ssh`),
 * so the key service, the init path and `confboot ssh` (holding the master secret file) all derive
 * the same key and nothing has to be stored. The join service puts the CA's public key and a host
 * certificate for the node's host key into each join ticket; the node writes both where sshd reads
 * them; `confboot ssh` signs short-lived user certificates with it.
 */
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { ConfbootError } from '../ports/errors.js';
import type { KMS } from '../ports/kms.js';
import {
  CERT_TIME_INFINITY,
  formatCertificate,
  type SshCaKey,
  signSshCertificate,
  unixSeconds,
} from './ssh-certificate.js';
import { ed25519PublicKey, formatAuthorizedKey, type SshPublicKey } from './ssh-keys.js';

/** Data key ID of the CA's seed (upstream `constants.SSHCAKeySuffix`). */
export const SSH_CA_KEY_ID = 'ca_emergency_ssh';
/** Length of the CA's seed in bytes (an Ed25519 seed). */
export const SSH_CA_SEED_LENGTH = 32;

/** Where a node keeps its emergency SSH files; sshd_config points at them (docs/emergency-ssh.md). */
export interface SshPaths {
  /** The CA's public key: sshd's `TrustedUserCAKeys`. */
  caPublicKeyPath: string;
  /** The host's private key (OpenSSH format): sshd's `HostKey`. */
  hostKeyPath: string;
  /** The host certificate signed by the CA: sshd's `HostCertificate`. */
  hostCertificatePath: string;
}

/** Upstream's paths (on the state disk). */
export const DEFAULT_SSH_PATHS: Readonly<SshPaths> = Object.freeze({
  caPublicKeyPath: '/var/run/state/ssh/ssh_ca.pub',
  hostKeyPath: '/var/run/state/ssh/ssh_host_ed25519_key',
  hostCertificatePath: '/var/run/state/ssh/ssh_host_cert.pub',
});

/**
 * How far back a certificate's validity starts, so that a verifier whose clock is a little behind
 * the signer's accepts a certificate signed just now.
 */
export const CLOCK_SKEW_ALLOWANCE_S = 300n;

/** Extensions of a user certificate: a terminal and port forwarding; no agent or X11 forwarding. */
export const USER_CERT_EXTENSIONS: Readonly<Record<string, string>> = Object.freeze({
  'permit-port-forwarding': '',
  'permit-pty': '',
});

/** PKCS#8 DER header of an Ed25519 private key (RFC 8410); the 32-byte seed follows it. */
const ED25519_PKCS8_PREFIX = Uint8Array.from([
  0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
]);

/** The emergency SSH CA of one cluster. */
export class SshCertificateAuthority {
  readonly #key: SshCaKey;

  private constructor(key: SshCaKey) {
    this.#key = key;
  }

  /**
   * The CA whose Ed25519 seed is the first 32 bytes of `seed` (upstream
   * `crypto.GenerateEmergencySSHCAKey`). Throws `invalid-argument` for a seed shorter than 32 bytes.
   */
  static fromSeed(seed: Uint8Array): SshCertificateAuthority {
    if (seed.length < SSH_CA_SEED_LENGTH)
      throw new ConfbootError(
        'invalid-argument',
        `emergency SSH CA: seed of ${seed.length} bytes, need ${SSH_CA_SEED_LENGTH}`,
      );
    const der = new Uint8Array(ED25519_PKCS8_PREFIX.length + SSH_CA_SEED_LENGTH);
    der.set(ED25519_PKCS8_PREFIX);
    der.set(seed.subarray(0, SSH_CA_SEED_LENGTH), ED25519_PKCS8_PREFIX.length);
    const privateKey: KeyObject = createPrivateKey({ key: Buffer.from(der), format: 'der', type: 'pkcs8' });
    der.fill(0);
    const jwk = createPublicKey(privateKey).export({ format: 'jwk' });
    const raw = new Uint8Array(Buffer.from(jwk.x as string, 'base64url'));
    return new SshCertificateAuthority({ publicKey: ed25519PublicKey(raw), privateKey });
  }

  /**
   * The cluster's CA, from the data key `ca_emergency_ssh`. Rejects as the KMS does, and with
   * `invalid-argument` when it returns a short seed.
   */
  static async fromKms(kms: Pick<KMS, 'getDataKey'>): Promise<SshCertificateAuthority> {
    const seed = await kms.getDataKey(SSH_CA_KEY_ID, SSH_CA_SEED_LENGTH);
    try {
      return SshCertificateAuthority.fromSeed(seed);
    } finally {
      seed.fill(0);
    }
  }

  /** The CA's public key. */
  get publicKey(): SshPublicKey {
    return this.#key.publicKey;
  }

  /** The CA's public key as an authorized_keys line (join ticket field 11, sshd's `TrustedUserCAKeys`). */
  authorizedKey(): string {
    return formatAuthorizedKey(this.#key.publicKey);
  }

  /**
   * A host certificate for `hostKey` (join ticket field 12, sshd's `HostCertificate`): type host,
   * the principals given, key ID the first principal, valid from `now` (less the clock-skew
   * allowance) forever, no options or extensions. Returns its authorized_keys-format line.
   */
  signHostCertificate(args: {
    hostKey: SshPublicKey;
    principals: readonly string[];
    now: Date;
    nonce: Uint8Array;
  }): string {
    const cert = signSshCertificate(
      {
        key: args.hostKey,
        certType: 'host',
        keyId: args.principals[0] ?? '',
        principals: args.principals,
        validAfter: notBefore(args.now),
        validBefore: CERT_TIME_INFINITY,
        nonce: args.nonce,
      },
      this.#key,
    );
    return formatCertificate(cert);
  }

  /**
   * A user certificate for `userKey`, valid for the principals (login names) from `now` (less the
   * clock-skew allowance) to `validUntil`, with {@link USER_CERT_EXTENSIONS}. Returns its
   * authorized_keys-format line. Throws `invalid-argument` when `validUntil` is not after `now`.
   */
  signUserCertificate(args: {
    userKey: SshPublicKey;
    principals: readonly string[];
    keyId: string;
    now: Date;
    validUntil: Date;
    nonce: Uint8Array;
    serial?: bigint;
  }): string {
    if (args.validUntil.getTime() <= args.now.getTime())
      throw new ConfbootError('invalid-argument', 'SSH user certificate: ends before it starts');
    const cert = signSshCertificate(
      {
        key: args.userKey,
        certType: 'user',
        keyId: args.keyId,
        principals: args.principals,
        validAfter: notBefore(args.now),
        validBefore: unixSeconds(args.validUntil),
        nonce: args.nonce,
        ...(args.serial === undefined ? {} : { serial: args.serial }),
        extensions: USER_CERT_EXTENSIONS,
      },
      this.#key,
    );
    return formatCertificate(cert);
  }
}

function notBefore(now: Date): bigint {
  const s = unixSeconds(now) - CLOCK_SKEW_ALLOWANCE_S;
  return s < 0n ? 0n : s;
}
