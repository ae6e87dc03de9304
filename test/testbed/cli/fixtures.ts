/**
 * For the testbed command tests: a writable that keeps what it was sent, and scenario results as the
 * real scenarios return them (written by hand here; the scenarios themselves boot VMs or swtpm
 * nodes and are tested in test/testbed/mini and test/testbed/demo).
 */
import { Writable } from 'node:stream';
import type { DemoResult } from '../../../src/testbed/demo/result.js';
import type { MiniLifecycleResult, MiniResult } from '../../../src/testbed/mini/types.js';
import type { MiniUpgradeResult } from '../../../src/testbed/mini/upgrade.js';

/** A writable that keeps what was written. */
export function sink(): Writable & { text: () => string } {
  const chunks: Buffer[] = [];
  const w = new Writable({
    write(chunk, _enc, cb) {
      chunks.push(Buffer.from(chunk));
      cb();
    },
  });
  return Object.assign(w, { text: () => Buffer.concat(chunks).toString('utf8') });
}

/** A `mini up` result: a control plane, a worker that joined and a tampered one refused. */
export function miniResult(ok = true): MiniResult {
  const node = (name: string, role: 'control-plane' | 'worker', boot: 'good' | 'tampered') => ({
    name,
    role,
    boot,
    ip: '10.42.0.10',
    stage: boot === 'good' ? ('joined' as const) : ('refused' as const),
    accepted: boot === 'good',
    reason: boot === 'good' ? 'joined' : 'measurements: PCR 9',
    ...(boot === 'good' ? {} : { refusedBy: 'join-service' as const }),
    mismatches: [],
    diskInVm: {
      active: boot === 'good',
      cipher: 'aes',
      integrity: 'hmac(sha256)',
      keyslots: [0],
      initialPassphraseOpens: boot !== 'good',
    },
    diskOnHost: { opensWithInitialPassphrase: boot !== 'good', opensWithDerivedKey: boot === 'good' },
    pcr15: { actual: 'ab', expected: 'ab', matches: boot === 'good', zero: boot !== 'good' },
    consoleLog: `/tmp/mini/${name}.log`,
    seconds: 42,
  });
  return {
    accel: 'tcg',
    image: { key: '0123456789abcdef', kernelPackage: 'linux-image-cloud-amd64', initrdSha256: 'ff' },
    measurements: {
      computedFromImage: { '9': 'aa' },
      fromReferenceBoot: { '4': 'bb' },
      referenceSource: 'ref',
    },
    init: { ok: true, clusterId: 'c1d2', attestationChecks: ['quote'] },
    nodes: [
      node('control-plane-0', 'control-plane', 'good'),
      node('worker-0', 'worker', 'good'),
      node('tampered-0', 'worker', 'tampered'),
    ],
    netns: 'confboot-mini-1',
    workDir: '/tmp/confboot-mini-1',
    durationMs: 90_000,
    simulated: ['kubeadm'],
    ok,
  };
}

/** A `mini lifecycle` result with one step. */
export function lifecycleResult(ok = true): MiniLifecycleResult {
  return {
    accel: 'tcg',
    clusterId: 'c1d2',
    recoveryShares: { total: 3, threshold: 2 },
    diskIntegrity: { 'worker-0': 'hmac(sha256)' },
    steps: [
      {
        step: 'outage',
        node: 'worker-0',
        ok,
        rejoined: true,
        markerIntact: true,
        pcr15: 'cluster-marker',
        diskOpen: true,
        reason: 'rejoined with its disk',
        seconds: 38,
      },
    ],
    netns: 'confboot-mini-2',
    workDir: '/tmp/confboot-mini-2',
    durationMs: 60_000,
    simulated: ['kubeadm'],
    leftovers: [],
    ok,
  };
}

/** A `mini upgrade` result with one step. */
export function upgradeResult(ok = true): MiniUpgradeResult {
  return {
    accel: 'kvm',
    steps: [{ step: 'join-b', node: 'worker-b', ok, reason: 'B joined', seconds: 20 }],
    netns: 'confboot-mini-3',
    workDir: '/tmp/confboot-mini-3',
    durationMs: 30_000,
    simulated: ['kubeadm'],
    ok,
  };
}

/** A demo result: one node that joined, one tampered node refused; `good` false breaks a claim. */
export function demoResult(good = true): DemoResult {
  // The JoiningNodes deleted in the demo's simulated API server: none by anyone.
  const joiningNodes = { hostDeleted: [] as string[], operatorDeleted: [] as string[] };
  return {
    ...joiningNodes,
    clusterId: 'c1d2',
    durationMs: 12_000,
    workDir: '/tmp/confboot-demo-1',
    logFile: '/tmp/confboot-demo-1/demo.log',
    simulated: ['kubeadm'],
    jwks: { keys: [] },
    nodes: [
      {
        name: 'node-1',
        role: 'Worker',
        boot: 'good',
        joined: true,
        reason: 'joined',
        disk: 'issued-key',
        diskVerified: good,
        pcr15: 'ab'.repeat(32),
        pcr15Verified: true,
      },
      {
        name: 'node-2',
        role: 'Worker',
        boot: 'tampered',
        joined: false,
        reason: 'PCR12: expected 00, got 11',
        toldNode: 'measurements: PCR 12',
        disk: 'initial-passphrase',
        diskVerified: true,
        pcr15: '00'.repeat(32),
        pcr15Verified: true,
      },
    ],
  };
}
