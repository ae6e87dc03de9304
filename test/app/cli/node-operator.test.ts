import { afterEach, describe, expect, it } from 'vitest';
import { nodeOperatorCommand, reattestationSettings, run } from '../../../src/app/cli/node-operator.js';
import { parseOptions } from '../../../src/app/program/options.js';
import { kubeletCluster } from '../../support/kubelet-cluster.js';
import { captureStdio } from '../../support/stdio.js';
import { useTmpDirs } from '../../support/tmp.js';

const io = captureStdio();
const tmp = useTmpDirs('confboot-operator-cli-');
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0)) await c();
});

describe('confboot node-operator', () => {
  it('refuses an interval out of range with exit 2 and one line', async () => {
    expect(await run(['--interval-seconds', '0'])).toBe(2);
    expect(io.stderr()).toBe('confboot: --interval: want 1s to 1h, got "0"\n');
  });

  it('refuses --variant without --attestation-config (re-attestation needs both) with exit 2 and one line', async () => {
    expect(await run(['--variant', 'qemu-vtpm'])).toBe(2);
    expect(io.stderr()).toBe('confboot: re-attestation needs both --variant and --attestation-config\n');
  });

  it.each([
    ['no --variant: off', [], undefined],
    [
      '--reattest-interval 0: off',
      ['--variant', 'qemu-vtpm', '--attestation-config', 'a.json', '--reattest-interval', '0'],
      undefined,
    ],
    [
      'on, with the defaults',
      ['--variant', 'qemu-vtpm', '--attestation-config', 'a.json', '--qemu-ak-registry', 'r.json'],
      {
        variant: 'qemu-vtpm',
        attestationConfigPath: 'a.json',
        intervalMs: 300_000,
        cordon: false,
        port: 8080,
        concurrency: 16,
        deadlineMs: 10_000,
      },
    ],
    [
      'on, cordon opt-in and a short interval',
      [
        '--variant',
        'qemu-vtpm',
        '--attestation-config',
        'a.json',
        '--reattest-cordon',
        '--reattest-interval',
        '5s',
        '--cluster-id',
        '42'.repeat(32),
      ],
      { intervalMs: 5000, cordon: true, clusterId: new Uint8Array(32).fill(0x42) },
    ],
  ] as const)('re-attestation settings: %s', (_name, argv, want) => {
    const values = parseOptions([...argv], nodeOperatorCommand);
    const got = reattestationSettings(values!);
    if (want === undefined) expect(got).toBeUndefined();
    else expect(got).toMatchObject(want);
  });

  it('--once prints the round as JSON (SIMULATED API server, its ServiceAccount)', async () => {
    const c = await kubeletCluster(tmp());
    closers.push(c.close);
    expect(await run(['--once', '--kubeconfig', await c.serviceAccountConf('node-operator')])).toBe(0);
    expect(JSON.parse(io.stdout())).toMatchObject({
      approved: [],
      denied: [],
      deletedJoiningNodes: [],
      failures: [],
    });
  });

  it('exits 1 naming the failure when the cluster cannot be read', async () => {
    const c = await kubeletCluster(tmp());
    closers.push(c.close);
    const conf = await c.serviceAccountConf('nobody');
    expect(await run(['--once', '--kubeconfig', conf])).toBe(1);
    expect(io.stderr()).toMatch(/^confboot: listing .*403/);
  });
});
