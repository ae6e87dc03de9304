/**
 * A throwaway OpenSSH server on loopback for emergency SSH tests: the real `/usr/sbin/sshd` from
 * Debian, in the foreground, with a config in a temp dir that trusts a user CA and presents a host
 * certificate, and the real `ssh` client logging in with a certificate and checking the host's
 * certificate against an `@cert-authority` known_hosts line. Every wait is bounded and `stop()`
 * ends the server (SIGTERM, then SIGKILL). Test code only.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { userInfo } from 'node:os';
import { join } from 'node:path';
import { freePort } from './net.js';

/** sshd's privilege separation directory (Debian's build); it must exist for sshd to start. */
const PRIVSEP_DIR = '/run/sshd';

export interface SshdFiles {
  /** The host's private key (sshd `HostKey`). */
  hostKey: string;
  /** The host certificate (sshd `HostCertificate`). */
  hostCertificate: string;
  /** The user CA's authorized_keys line (sshd `TrustedUserCAKeys`). */
  trustedUserCaKeys: string;
}

export interface Sshd {
  port: number;
  /** What sshd logged so far (stderr, `-e`). */
  log(): string;
  stop(): Promise<void>;
}

/** The name the tests log in as: the user running them (root under CI). */
export const LOGIN_USER = userInfo().username;

/** Starts sshd on 127.0.0.1 with `files`; resolves once it listens (at most 10 s). */
export async function startSshd(dir: string, files: SshdFiles): Promise<Sshd> {
  if (process.getuid?.() === 0 && !existsSync(PRIVSEP_DIR)) mkdirSync(PRIVSEP_DIR, { mode: 0o755 });
  const port = await freePort();
  const config = join(dir, 'sshd_config');
  writeFileSync(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${files.hostKey}`,
      `HostCertificate ${files.hostCertificate}`,
      `TrustedUserCAKeys ${files.trustedUserCaKeys}`,
      // Only certificates signed by the CA log in: no authorized_keys, passwords or PAM.
      'AuthorizedKeysFile none',
      'PubkeyAuthentication yes',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'UsePAM no',
      'PermitRootLogin prohibit-password',
      // The temp dir is not root-owned all the way up.
      'StrictModes no',
      'PidFile none',
      'LogLevel VERBOSE',
      '',
    ].join('\n'),
  );
  const child = spawn('/usr/sbin/sshd', ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    log += d;
  });
  const stop = () => stopProcess(child);
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`sshd did not listen within 10 s:\n${log}`)), 10_000);
      const check = () => {
        if (log.includes(`Server listening on 127.0.0.1 port ${port}`)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stderr?.on('data', check);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`sshd exited with ${code}:\n${log}`));
      });
    });
  } catch (err) {
    await stop();
    throw err;
  }
  return { port, log: () => log, stop };
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

export interface SshLogin {
  /** The private key (`-i`). */
  identity: string;
  /** The user certificate (`CertificateFile`). */
  certificate: string;
  /** The known_hosts file with the `@cert-authority` line the host certificate must chain to. */
  knownHosts: string;
}

/**
 * Runs `echo confboot-ssh-ok` on the server as {@link LOGIN_USER} with the real ssh client, nothing
 * from the user's own ssh config or agent; resolves with its exit code and output (at most 30 s).
 */
export function sshRun(
  port: number,
  login: SshLogin,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const args = [
    '-F',
    '/dev/null',
    '-i',
    login.identity,
    '-o',
    `CertificateFile=${login.certificate}`,
    '-o',
    'IdentitiesOnly=yes',
    '-o',
    'IdentityAgent=none',
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    `UserKnownHostsFile=${login.knownHosts}`,
    '-o',
    'GlobalKnownHostsFile=/dev/null',
    '-o',
    'BatchMode=yes',
    '-o',
    'ConnectTimeout=10',
    '-p',
    String(port),
    `${LOGIN_USER}@127.0.0.1`,
    'echo confboot-ssh-ok',
  ];
  return new Promise((resolve) => {
    execFile('ssh', args, { timeout: 30_000, encoding: 'utf8' }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : null;
      resolve({ code, stdout, stderr });
    });
  });
}

/** A known_hosts line trusting `caLine` for host certificates of 127.0.0.1 on `port`. */
export function certAuthorityLine(port: number, caLine: string): string {
  return `@cert-authority [127.0.0.1]:${port} ${caLine.trim()}\n`;
}
