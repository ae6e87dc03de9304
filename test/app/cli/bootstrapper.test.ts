/**
 * `confboot bootstrapper` on real parts where they exist here: a real swtpm (PCR 15 read and
 * extended through tpm2-tools), a real LUKS2 image (header checked, reset token written by
 * cryptsetup), the real QEMU metadata server, real attested TLS with the qemu-vtpm validator. No
 * join service runs (the join side just retries), and kubeadm is never reached.
 */
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startMetadataServer } from '../../../src/adapters/cloud/qemu/metadata-server.js';
import { hashInitSecret } from '../../../src/adapters/crypto/bcrypt-secret-hash.js';
import { GrpcInitClient, type InitOutcome } from '../../../src/adapters/grpc/init-client.js';
import { clusterKmsUri, NO_STORE_URI } from '../../../src/adapters/grpc/kms-uri.js';
import { HttpAttestationFetcher } from '../../../src/adapters/http/verification-client.js';
import { SystemClock } from '../../../src/adapters/system/system-clock.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { run } from '../../../src/app/cli/bootstrapper.js';
import { CSPS, VARIANTS_BY_CSP } from '../../../src/app/modules/index.js';
import { createValidator } from '../../../src/app/registry/validators.js';
import { MeasurementsPolicy } from '../../../src/domain/measurements.js';
import { dumpMetadata, formatImage } from '../../adapters/disk/luks-image.js';
import { freePort } from '../../support/net.js';
import { useSwtpm } from '../../support/swtpm.js';
import { useTmpDirs } from '../../support/tmp.js';

const tmp = useTmpDirs('confboot-bootstrapper-cli-');
const swtpm = useSwtpm();
const clock = new SystemClock();

/** A writable that keeps what was written. */
function sink(): Writable & { text: () => string } {
  const chunks: Buffer[] = [];
  const w = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(Buffer.from(chunk));
      cb();
    },
  });
  return Object.assign(w, { text: () => Buffer.concat(chunks).toString('utf8') });
}

/**
 * A script standing in for systemctl (this machine's kubelet and power are never touched): appends
 * its arguments to a log and exits with `exitCode`.
 */
async function recorder(dir: string, name: string, exitCode = 0) {
  const path = join(dir, name);
  const log = join(dir, `${name}.log`);
  await writeFile(path, `#!/bin/sh\necho "$*" >> '${log}'\nexit ${exitCode}\n`, { mode: 0o755 });
  return {
    command: (...args: string[]) => [path, ...args].join(' '),
    calls: async () => (existsSync(log) ? (await readFile(log, 'utf8')).trim().split('\n') : []),
  };
}

const stderr: string[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  stderr.length = 0;
});
function captureStderr(): void {
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stderr.push(String(chunk));
    return true;
  });
}

describe('confboot bootstrapper: flags', () => {
  it.each(CSPS)('--check-wiring on %s resolves every binding and exits 0', async (csp) => {
    const out = sink();
    const code = await run(
      ['--csp', csp, '--disk', '/nonexistent', '--check-wiring', '--log-level', 'silent'],
      {
        out,
      },
    );
    expect(code).toBe(0);
    expect(out.text()).toMatch(
      new RegExp(`^Wiring of ${csp}/${VARIANTS_BY_CSP[csp]?.[0]} resolves: \\d+ bindings`),
    );
  });

  it.each([
    [
      'the dummy variant',
      ['--csp', 'qemu', '--attestation-variant', 'dummy'],
      /--variant: .*dummy is for tests only/,
    ],
    [
      'a variant of another cloud',
      ['--csp', 'aws', '--attestation-variant', 'qemu-vtpm'],
      /not available on aws/,
    ],
    ['an unknown cloud', ['--csp', 'mars'], /--cloud: want one of .*got "mars"/],
    [
      'a bad init address',
      ['--csp', 'qemu', '--init-listen', 'nowhere'],
      /--init-listen: expected HOST:PORT/,
    ],
  ])('refuses %s with exit code 2', async (_name, args, message) => {
    captureStderr();
    expect(await run([...args, '--disk', '/d', '--check-wiring'])).toBe(2);
    expect(stderr.join('')).toMatch(message);
  });

  it.each(['--reboot-command', '--kubelet-restart-command'])(
    '%s with no command is a usage error',
    async (flag) => {
      captureStderr();
      expect(await run(['--csp', 'qemu', '--disk', '/d', flag, '  '])).toBe(2);
      expect(stderr.join('')).toContain(`${flag}: expected a command or 'none'`);
    },
  );

  it('--cloud (or --csp) and --disk are required', async () => {
    captureStderr();
    expect(await run(['--disk', '/d'])).toBe(2);
    expect(stderr.join('')).toMatch(/missing required option --cloud/);
  });
});

describe('confboot bootstrapper on a qemu node', () => {
  /** Runs the bootstrapper on a TPM whose PCR 15 is set, with `extra` flags. */
  async function runBootstrapped(extra: string[]): Promise<{ code: number; out: string }> {
    const tpm = await swtpm();
    await new Tpm2ToolsTpm({ tcti: tpm.tcti }).pcrEvent(15, new Uint8Array(32).fill(1));
    const out = sink();
    const code = await run(
      [
        ...['--csp', 'qemu', '--tcti', tpm.tcti, '--disk', '/nonexistent'],
        ...['--init-listen', `127.0.0.1:${await freePort()}`, '--log-level', 'silent', ...extra],
      ],
      { out },
    );
    return { code, out: out.text() };
  }

  it('already bootstrapped (PCR 15 set on the TPM): restarts the kubelet, starts nothing else and exits 0', async () => {
    const kubelet = await recorder(tmp(), 'systemctl');
    const { code, out } = await runBootstrapped([
      '--kubelet-restart-command',
      kubelet.command('restart', 'kubelet'),
    ]);
    expect(code).toBe(0);
    expect(out).toBe('Node is already bootstrapped (PCR 15 is set); kubelet restarted\n');
    expect(await kubelet.calls()).toEqual(['restart kubelet']);
  });

  it('already bootstrapped with --kubelet-restart-command none: nothing to do', async () => {
    const { code, out } = await runBootstrapped(['--kubelet-restart-command', 'none']);
    expect(code).toBe(0);
    expect(out).toBe('Node is already bootstrapped (PCR 15 is set); nothing to do\n');
  });

  it('--verify-listen: a bootstrapped node serves the verification service until stopped, then exits 0', async () => {
    const tpm = await swtpm();
    await new Tpm2ToolsTpm({ tcti: tpm.tcti }).pcrEvent(15, new Uint8Array(32).fill(1));
    const out = sink();
    const stop = new AbortController();
    let listening!: (port: number) => void;
    const port = new Promise<number>((r) => (listening = r));
    const exited = run(
      [
        ...[
          '--csp',
          'qemu',
          '--tcti',
          tpm.tcti,
          '--disk',
          '/nonexistent',
          '--kubelet-restart-command',
          'none',
        ],
        ...['--init-listen', `127.0.0.1:${await freePort()}`, '--log-level', 'silent'],
        ...['--verify-listen', '127.0.0.1:0'],
      ],
      { out, signal: stop.signal, onVerificationListening: listening },
    );
    const got = await new HttpAttestationFetcher().fetch(`127.0.0.1:${await port}`, Buffer.alloc(32, 6));
    // A qemu-vtpm document from the node's TPM: upstream's Go-JSON with the bound user data.
    expect(JSON.parse(Buffer.from(got.document).toString()).UserData).toBe(
      Buffer.from('VerifyService').toString('base64'),
    );
    stop.abort();
    expect(await exited).toBe(0);
    expect(out.text()).toBe('Node is already bootstrapped (PCR 15 is set); nothing to do\n');
  });

  it('already bootstrapped and the kubelet restart fails: exit 1 naming the command', async () => {
    const kubelet = await recorder(tmp(), 'systemctl', 5);
    captureStderr();
    const { code } = await runBootstrapped([
      '--kubelet-restart-command',
      kubelet.command('restart', 'kubelet'),
    ]);
    expect(code).toBe(1);
    expect(stderr.join('')).toMatch(
      /restarting the kubelet of a bootstrapped node: restarting the kubelet \(.*systemctl restart kubelet\): exit code 5/,
    );
  });

  it('--disk-mapper-only gets the state disk ready and exits 0 without starting the init server', async () => {
    const dir = tmp();
    const tpm = await swtpm();
    const image = await formatImage(dir);
    const out = sink();
    let listened = false;
    const code = await run(
      [
        ...['--csp', 'qemu', '--tcti', tpm.tcti, '--disk-mapper-only'],
        ...['--disk', image.path, '--initial-passphrase-file', image.keyFile],
        ...['--state-mapping', 'none', '--state-disk-integrity', 'none', '--log-level', 'silent'],
      ],
      { out, onListening: () => (listened = true) },
    );
    expect(code).toBe(0);
    expect(out.text()).toBe('State disk ready (fresh)\n');
    expect(listened).toBe(false);
  });

  it('init fails after the node lock: the LUKS2 disk is marked for reset, the reboot command runs, exit 1 with the reason; started again in the same boot it reboots again', async () => {
    const dir = tmp();
    const tpm = await swtpm();
    const image = await formatImage(dir);
    const secret = new TextEncoder().encode('init-secret');
    const leases = join(dir, 'leases');
    await writeFile(leases, '0 52:54:00:00:00:01 127.0.0.1 control-plane-0 *\n');
    const metadata = await startMetadataServer({
      leasesFile: leases,
      initSecretHash: await hashInitSecret(secret, 4),
      host: '127.0.0.1',
      port: 0,
    });
    try {
      let onListening!: (port: number) => void;
      const listening = new Promise<number>((resolve) => {
        onListening = resolve;
      });
      const out = sink();
      const reboot = await recorder(dir, 'systemctl');
      const args = [
        ...['--csp', 'qemu', '--attestation-variant', 'qemu-vtpm', '--tcti', tpm.tcti],
        ...['--disk', image.path, '--initial-passphrase-file', image.keyFile],
        // kubeadm fails after the node lock (the disk mapper leaves this formatted, never
        // initialised disk to the bootstrapper).
        ...[
          '--kubeadm',
          '/bin/false',
          '--state-mapping',
          'none',
          '--state-disk-integrity',
          'none',
          '--format-pbkdf2-iterations',
          '1000',
        ],
        ...['--metadata-url', `http://127.0.0.1:${metadata.port}`, '--init-listen', '127.0.0.1:0'],
        ...[
          '--join-service-port',
          String(await freePort()),
          '--node-state-file',
          join(dir, 'node_state.json'),
        ],
        ...['--log-level', 'silent', '--reboot-command', reboot.command('reboot')],
      ];
      const exit = run(args, { out, onListening });
      const port = await Promise.race([
        listening,
        exit.then((c) => Promise.reject(new Error(`exited ${c}`))),
      ]);

      // The operator's side: verify the node's qemu-vtpm attestation against its real PCR 4.
      const pcrs = await new Tpm2ToolsTpm({ tcti: tpm.tcti }).readPcrs([4]);
      const validator = createValidator('qemu-vtpm', {
        policy: new MeasurementsPolicy(
          new Map([[4, { expected: pcrs.get(4) as Uint8Array, warnOnly: false }]]),
        ),
      });
      const client = new GrpcInitClient({ validators: [validator], clock, defaultTimeoutMs: 30_000 });
      captureStderr();
      const outcome: InitOutcome = await client.init(`127.0.0.1:${port}`, {
        kmsUri: clusterKmsUri(new Uint8Array(32).fill(1), new Uint8Array(32).fill(2)),
        storageUri: NO_STORE_URI,
        measurementSalt: new Uint8Array(32).fill(3),
        kubernetesVersion: 'v1.31.0',
        conformanceMode: false,
        kubernetesComponents: [],
        initSecret: secret,
        clusterName: '',
        apiserverCertSans: [],
        serviceCidr: '',
      });
      expect(outcome.kind).toBe('failure');
      if (outcome.kind === 'failure') expect(outcome.error).toMatch(/kubeadm/);

      expect(await exit).toBe(1);
      expect(stderr.join('')).toMatch(
        /bootstrapping failed: bootstrapper: init failed after the node lock \(state disk marked for reset; reboot requested\): .*kubeadm/,
      );
      expect(await reboot.calls()).toEqual(['reboot']);
      const meta = (await dumpMetadata(image.path)) as {
        tokens: Record<string, { diskIsInitialized?: boolean }>;
      };
      expect(meta.tokens['0']?.diskIsInitialized).toBe(false);
      const pcr15 = (await new Tpm2ToolsTpm({ tcti: tpm.tcti }).readPcrs([15])).get(15) as Uint8Array;
      expect(pcr15.some((b) => b !== 0)).toBe(true);

      // The reboot did not happen (a stand-in ran): started again, the node must not pass as bootstrapped.
      stderr.length = 0;
      expect(await run(args, { out: sink(), onListening: () => {} })).toBe(1);
      expect(stderr.join('')).toMatch(
        /disk mapper failed: disk mapper: the node failed after the node lock earlier in this boot: PCR 15 is set and the state disk is marked for reset \(reboot requested\)/,
      );
      expect(await reboot.calls()).toEqual(['reboot', 'reboot']);
    } finally {
      await metadata.close();
    }
  }, 60_000);
});
