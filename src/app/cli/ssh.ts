/**
 * `confboot ssh`: signs a short-lived emergency SSH user certificate for an operator's public key
 * with the cluster's SSH CA (docs/emergency-ssh.md). The CA is derived from the master secret file
 * `confboot init` wrote, exactly as the key service derives it for the join service, so every node
 * whose sshd trusts the CA from its join ticket accepts the certificate until it expires. Nothing is
 * sent anywhere.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { CryptoRandom } from '../../adapters/system/crypto-random.js';
import { SystemClock } from '../../adapters/system/system-clock.js';
import { deriveDataKey } from '../../domain/key-derivation.js';
import { SSH_CA_KEY_ID, SSH_CA_SEED_LENGTH, SshCertificateAuthority } from '../../domain/ssh-ca.js';
import { CERT_NONCE_LENGTH } from '../../domain/ssh-certificate.js';
import { parseAuthorizedKey } from '../../domain/ssh-keys.js';
import { isConfbootError, messageOf } from '../../ports/errors.js';
import { runCommand, UsageError } from '../program/args.js';
import { defineCommand, parseOptions } from '../program/options.js';
import { printResult } from '../program/output.js';
import { MASTER_SECRET_FILE_OPTION, OUTPUT_OPTION } from '../program/shared-options.js';
import { parseMasterSecretFile } from './operator-inputs.js';

/** Longest validity `--valid` accepts: emergency access is short-lived. */
export const MAX_SSH_CERT_VALIDITY_MS = 24 * 3600_000;

const UNIT_MS: Readonly<Record<string, number>> = { s: 1000, m: 60_000, h: 3600_000 };

export const sshCommand = defineCommand({
  name: 'ssh',
  summary:
    "Sign a short-lived emergency SSH user certificate for your public key with the cluster's SSH CA, derived from the master secret.",
  options: {
    key: {
      type: 'string',
      valueName: 'F',
      description: 'your OpenSSH public key file, e.g. ~/.ssh/id_ed25519.pub',
      required: true,
    },
    'master-secret-file': MASTER_SECRET_FILE_OPTION,
    valid: {
      type: 'string',
      valueName: 'DURATION',
      default: '4h',
      description: 'how long the certificate is valid from now: 90s, 30m, 4h, 1h30m; at most 24h',
      parse: (raw: string, flag: string) => {
        const ms = parseDuration(flag, raw);
        if (ms > MAX_SSH_CERT_VALIDITY_MS) throw new UsageError('--valid: at most 24h');
        return ms;
      },
    },
    principal: {
      type: 'string',
      valueName: 'P',
      multiple: true,
      description: 'login name the certificate is valid for; repeat for more (default root)',
      parse: (raw: string) => {
        if (!/^[A-Za-z0-9._][A-Za-z0-9._-]*$/.test(raw))
          throw new UsageError('--principal: a login name of letters, digits, ".", "_" and "-"');
        return raw;
      },
    },
    stdout: {
      type: 'boolean',
      description: 'print the certificate line on stdout instead of writing the file',
    },
    output: OUTPUT_OPTION,
  },
  epilog: [
    'Writes the certificate next to the key as <key>-cert.pub (id_ed25519.pub → id_ed25519-cert.pub,',
    'replacing an older one), where ssh finds it for `ssh -i ~/.ssh/id_ed25519 root@NODE`; --stdout prints',
    'it instead. The certificate starts 5 minutes in the past (clock skew) and allows a terminal and port',
    'forwarding. Nodes trust it through sshd_config `TrustedUserCAKeys /var/run/state/ssh/ssh_ca.pub`.',
    "It also prints the `@cert-authority` known_hosts line that lets ssh check the nodes' host certificates.",
  ].join('\n'),
  exitCodes: { 0: 'signed', 1: 'the certificate could not be written' },
});

/** Milliseconds of `90s`, `30m`, `4h`, `1h30m`; throws UsageError for anything else or for 0. */
export function parseDuration(flag: string, text: string): number {
  if (!/^(\d+[smh])+$/.test(text))
    throw new UsageError(`--${flag} ${JSON.stringify(text)}: want a duration like 30m, 4h or 1h30m`);
  let ms = 0;
  for (const [, n, unit] of text.matchAll(/(\d+)([smh])/g)) ms += Number(n) * (UNIT_MS[unit as string] ?? 0);
  if (ms <= 0) throw new UsageError(`--${flag} must be longer than 0`);
  return ms;
}

/** `<key>-cert.pub` for `<key>.pub` (what ssh looks for beside the private key `-i` names). */
export function certificatePathOf(keyPath: string): string {
  return `${keyPath.endsWith('.pub') ? keyPath.slice(0, -'.pub'.length) : keyPath}-cert.pub`;
}

async function readInput(flag: string, path: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new UsageError(`--${flag} ${path}: ${(err as NodeJS.ErrnoException).code ?? messageOf(err)}`);
  }
}

/** Runs `confboot ssh`. */
export async function run(argv: string[]): Promise<number> {
  return runCommand(async () => {
    const v = parseOptions(argv, sshCommand);
    if (v === undefined) return 0;
    const keyPath = v.key;
    const validMs = v.valid;
    const principals = v.principal ?? ['root'];
    const keyLine = new TextDecoder().decode(await readInput('key', keyPath));
    let userKey: ReturnType<typeof parseAuthorizedKey>;
    try {
      userKey = parseAuthorizedKey(keyLine, `--key ${keyPath}`);
    } catch (err) {
      throw new UsageError(isConfbootError(err) ? err.message : messageOf(err));
    }
    const comment = keyLine.trim().split(/\s+/).slice(2).join(' ');
    const { masterSecret, masterSalt } = parseMasterSecretFile(
      await readInput('master-secret-file', v['master-secret-file']),
    );
    const seed = deriveDataKey(masterSecret, masterSalt, SSH_CA_KEY_ID, SSH_CA_SEED_LENGTH);
    masterSecret.fill(0);
    masterSalt.fill(0);
    const ca = SshCertificateAuthority.fromSeed(seed);
    seed.fill(0);
    const random = new CryptoRandom();
    const now = new SystemClock().now();
    const validUntil = new Date(now.getTime() + validMs);
    const serial = new DataView(random.bytes(8).buffer).getBigUint64(0);
    const line = ca.signUserCertificate({
      userKey,
      principals,
      keyId: comment === '' ? 'confboot ssh' : `confboot ssh: ${comment}`,
      now,
      validUntil,
      nonce: random.bytes(CERT_NONCE_LENGTH),
      serial,
    });
    const what = `user certificate for ${principals.join(', ')} (serial ${serial}), valid until ${validUntil.toISOString()}`;
    const certPath = v.stdout ? undefined : certificatePathOf(keyPath);
    if (certPath !== undefined)
      try {
        await writeFile(certPath, line, { mode: 0o644 });
      } catch (err) {
        throw new Error(`writing ${certPath}: ${(err as NodeJS.ErrnoException).code ?? messageOf(err)}`);
      }
    if (certPath === undefined && v.output === 'table') process.stderr.write(`ssh: signed a ${what}\n`);
    const result = {
      certificate: line,
      path: certPath ?? null,
      principals,
      serial: String(serial),
      validUntil: validUntil.toISOString(),
      // Nodes present host certificates of the same CA: this line lets ssh check them.
      knownHostsLine: `@cert-authority * ${ca.authorizedKey().trimEnd()}`,
    };
    return printResult(v.output, 'ssh', 0, result, (r) =>
      r.path === null
        ? r.certificate
        : `Wrote ${r.path}: ${what}\nknown_hosts line for the nodes: ${r.knownHostsLine}`,
    );
  });
}

/** The command's option table. */
export const commandSpecs = [sshCommand];
