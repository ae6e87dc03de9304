/**
 * The node's SSH host key as OpenSSH keeps it: an `openssh-key-v1` private key file (what
 * `ssh-keygen` writes and sshd's `HostKey` reads, by default `/var/run/state/ssh/ssh_host_ed25519_key`).
 * Its public key is read from the file's unencrypted header, so the private part is never decoded
 * here. A missing file means the node has no sshd: emergency SSH is not set up on it. The names for
 * the host certificate are the machine's hostname and its non-loopback addresses.
 */
import { readFile } from 'node:fs/promises';
import { hostname, networkInterfaces } from 'node:os';
import { ConfbootError, messageOf } from '../../ports/errors.js';
import type { SshHostKey } from '../../ports/ssh-host-key.js';

/** Default path of the host key (upstream `constants.SSHHostKeyPath`). */
export const DEFAULT_SSH_HOST_KEY_PATH = '/var/run/state/ssh/ssh_host_ed25519_key';

/** Largest host key file read (an RSA-16384 key is about 12 KiB). */
const MAX_KEY_FILE_BYTES = 64 * 1024;

const BEGIN = '-----BEGIN OPENSSH PRIVATE KEY-----';
const END = '-----END OPENSSH PRIVATE KEY-----';
const MAGIC = 'openssh-key-v1\0';

/**
 * The public key (SSH wire format) in the header of an `openssh-key-v1` private key file: magic,
 * cipher, KDF, KDF options, number of keys (1), then the public key. Throws `invalid-argument` for
 * anything else.
 */
export function publicKeyOfOpenSshPrivateKey(text: string, what: string): Uint8Array {
  const bad = (why: string) => new ConfbootError('invalid-argument', `${what}: ${why}`);
  const begin = text.indexOf(BEGIN);
  const end = text.indexOf(END);
  if (begin < 0 || end < begin) throw bad('not an OpenSSH private key file');
  const data = Buffer.from(text.slice(begin + BEGIN.length, end).replace(/\s+/g, ''), 'base64');
  if (data.subarray(0, MAGIC.length).toString('latin1') !== MAGIC) throw bad('not an openssh-key-v1 key');
  let at = MAGIC.length;
  const string = (): Buffer => {
    if (at + 4 > data.length) throw bad('truncated key file');
    const n = data.readUInt32BE(at);
    if (at + 4 + n > data.length) throw bad('truncated key file');
    const out = data.subarray(at + 4, at + 4 + n);
    at += 4 + n;
    return out;
  };
  string(); // cipher name
  string(); // KDF name
  string(); // KDF options
  if (at + 4 > data.length || data.readUInt32BE(at) !== 1) throw bad('not exactly one key in the file');
  at += 4;
  const publicKey = string();
  if (publicKey.length === 0) throw bad('empty public key');
  return new Uint8Array(publicKey);
}

/** Names of the machine for its host certificate: the hostname, then the non-loopback addresses. */
export function machinePrincipals(): string[] {
  const addresses = Object.values(networkInterfaces())
    .flatMap((list) => list ?? [])
    .filter((a) => !a.internal)
    .map((a) => a.address);
  return [...new Set([hostname(), ...addresses])].filter((p) => p !== '');
}

/** The host key in an OpenSSH private key file. */
export class OpenSshHostKeyFile implements SshHostKey {
  readonly #path: string;

  constructor(options: { path?: string } = {}) {
    this.#path = options.path ?? DEFAULT_SSH_HOST_KEY_PATH;
  }

  async publicKey(): Promise<Uint8Array | undefined> {
    let data: Buffer;
    try {
      data = await readFile(this.#path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new ConfbootError('internal', `reading SSH host key ${this.#path}: ${messageOf(err)}`, {
        cause: err,
      });
    }
    if (data.length > MAX_KEY_FILE_BYTES)
      throw new ConfbootError(
        'invalid-argument',
        `SSH host key ${this.#path}: larger than ${MAX_KEY_FILE_BYTES} bytes`,
      );
    return publicKeyOfOpenSshPrivateKey(data.toString('latin1'), `SSH host key ${this.#path}`);
  }

  principals(): Promise<string[]> {
    return Promise.resolve(machinePrincipals());
  }
}
