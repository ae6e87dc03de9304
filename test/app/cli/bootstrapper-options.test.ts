/**
 * The bootstrapper's option table: what the flags parse to, which cloud they name, and the node
 * config and state disk they become. The program that runs with them is tested in
 * test/app/cli/bootstrapper.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  type BootstrapperValues,
  bootstrapperCommand,
  cloudFromOptions,
  nodeConfigFromOptions,
  stateDiskFromOptions,
} from '../../../src/app/cli/bootstrapper-options.js';
import { UsageError } from '../../../src/app/program/args.js';
import { parseOptions } from '../../../src/app/program/options.js';

/** Parses `argv` as `confboot bootstrapper` does (no environment). */
function parse(argv: string[], csp?: 'qemu'): BootstrapperValues {
  const values = parseOptions(argv, bootstrapperCommand(csp), undefined, { env: {} });
  if (values === undefined) throw new Error('printed help');
  return values;
}

describe('the bootstrapper option table', () => {
  it('parses durations, ports, addresses and commands into their typed values', () => {
    const v = parse([
      '--disk',
      '/dev/sdb',
      '--recovery-share-ttl',
      '90s',
      '--join-service-port',
      '30090',
      '--init-listen',
      '[::1]:9000',
      '--reboot-command',
      '/bin/echo  reboot now',
      '--kubelet-restart-command',
      'none',
    ]);
    expect(v['recovery-share-ttl']).toBe(90_000);
    expect(v['join-service-port']).toBe(30090);
    expect(v['init-listen']).toEqual({ host: '::1', port: 9000 });
    expect(v['reboot-command']).toEqual(['/bin/echo', 'reboot', 'now']);
    expect(v['kubelet-restart-command']).toBeUndefined();
    expect(v['verify-listen']).toBeUndefined();
  });

  it('reads a bare --recovery-share-ttl-seconds number as seconds', () => {
    expect(parse(['--disk', '/d', '--recovery-share-ttl-seconds', '60'])['recovery-share-ttl']).toBe(60_000);
  });

  it.each([
    ['a port out of range', ['--join-service-port', '70000'], /--join-service-port: expected a port/],
    ['an address without a port', ['--verify-listen', 'localhost'], /--verify-listen: expected HOST:PORT/],
    ['an unknown integrity mode', ['--state-disk-integrity', 'crc'], /--state-disk-integrity: want one of/],
    ['zero PBKDF2 iterations', ['--format-pbkdf2-iterations', '0'], /want a whole number ≥ 1/],
  ])('refuses %s with a usage error', (_name, args, message) => {
    expect(() => parse(['--disk', '/d', ...args])).toThrow(message);
  });
});

describe('cloudFromOptions', () => {
  it('takes the entrypoint’s cloud, or the one --cloud names', () => {
    expect(cloudFromOptions('qemu', { cloud: undefined })).toBe('qemu');
    expect(cloudFromOptions('qemu', { cloud: 'qemu' })).toBe('qemu');
    expect(cloudFromOptions(undefined, { cloud: 'aws' })).toBe('aws');
  });

  it.each([
    ['another cloud than the entrypoint’s', 'qemu', 'aws', /this entrypoint is for qemu, got "aws"/],
    ['no cloud at all', undefined, undefined, /missing required option --cloud/],
  ] as const)('refuses %s with a usage error', (_name, csp, cloud, message) => {
    const call = () => cloudFromOptions(csp, { cloud });
    expect(call).toThrow(UsageError);
    expect(call).toThrow(message);
  });
});

describe('nodeConfigFromOptions', () => {
  it('puts each flag where the node config keeps it, and the cloud’s first variant by default', () => {
    const config = nodeConfigFromOptions(
      'qemu',
      parse([
        '--disk',
        '/dev/vdb',
        '--pki-dir',
        '/tmp/pki',
        '--metadata-url',
        'http://10.0.0.1:8080',
        '--metadata-local-address',
        '10.0.0.5',
        '--kubeadm',
        '/opt/kubeadm',
        '--log-level',
        'warn',
      ]),
    );
    expect(config).toMatchObject({
      csp: 'qemu',
      variant: 'qemu-vtpm',
      diskDevice: '/dev/vdb',
      kubeadmPath: '/opt/kubeadm',
      logLevel: 'warn',
      metadata: { baseUrl: 'http://10.0.0.1:8080', localAddress: '10.0.0.5' },
    });
    expect(config.paths.pkiDir).toBe('/tmp/pki');
    expect(config.metadata.apiEndpoint).toBeUndefined();
  });

  it('refuses a variant of another cloud as a usage error', () => {
    expect(() => nodeConfigFromOptions('aws', parse(['--disk', '/d', '--variant', 'qemu-vtpm']))).toThrow(
      UsageError,
    );
  });
});

describe('stateDiskFromOptions', () => {
  const config = { diskDevice: '/dev/vdb', initialPassphrasePath: '/run/key' };

  it('maps the disk as "state" with integrity by default and formats with cryptsetup’s KDF', () => {
    expect(stateDiskFromOptions(parse(['--disk', '/dev/vdb']), config)).toEqual({
      devicePath: '/dev/vdb',
      integrity: 'hmac-sha256',
      initialPassphrasePath: '/run/key',
      mappingName: 'state',
    });
  });

  it('checks the key only with --state-mapping none, and forces PBKDF2 when asked', () => {
    const disk = stateDiskFromOptions(
      parse(['--disk', '/d', '--state-mapping', 'none', '--format-pbkdf2-iterations', '1000']),
      { diskDevice: '/d' },
    );
    expect(disk.mappingName).toBeUndefined();
    expect(disk.formatPbkdfArgs).toEqual(['--pbkdf', 'pbkdf2', '--pbkdf-force-iterations', '1000']);
  });

  it('refuses a mount point without a mapping', () => {
    expect(() =>
      stateDiskFromOptions(
        parse(['--disk', '/d', '--state-mapping', 'none', '--state-mount', '/run/state']),
        {
          diskDevice: '/d',
        },
      ),
    ).toThrow('--state-mount needs a dm-crypt mapping (not --state-mapping none)');
  });
});
