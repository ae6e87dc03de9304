/**
 * The demo end to end: real swtpm, cryptsetup, attested TLS and gRPC on loopback; kubeadm and the
 * Kubernetes API simulated (as the demo says). The test recomputes PCR 15 itself and checks that
 * nothing is left behind.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { run as receiptCli } from '../../../src/app/cli/receipt.js';
import { demoSucceeded, renderSummary } from '../../../src/testbed/cli/demo.js';
import { expectedAttestationConfig } from '../../../src/testbed/demo/boot-measurements.js';
import { runDemo } from '../../../src/testbed/demo/demo.js';
import type { DemoNodeResult, DemoResult } from '../../../src/testbed/demo/result.js';

/** Processes whose command line mentions `dir` (the demo's swtpm state dirs live under it). */
const processesUnder = (dir: string) => {
  try {
    return execFileSync('pgrep', ['-f', dir], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
};

describe('confboot demo result', () => {
  const node = (over: Partial<DemoNodeResult>): DemoNodeResult => ({
    name: 'worker-1',
    role: 'Worker',
    boot: 'good',
    joined: true,
    reason: 'joined with a join ticket',
    disk: 'issued-key',
    diskVerified: true,
    pcr15: '00'.repeat(32),
    pcr15Verified: true,
    ...over,
  });
  const result = (nodes: DemoNodeResult[]): DemoResult => ({
    clusterId: 'ab'.repeat(32),
    durationMs: 1000,
    workDir: undefined,
    logFile: undefined,
    simulated: ['kubeadm'],
    jwks: { keys: [] },
    hostDeleted: [],
    operatorDeleted: [],
    nodes,
  });

  it('fails the demo when a disk state is not the one its outcome needs, and shows it', () => {
    const refused = node({ name: 'worker-2', boot: 'tampered', joined: false, disk: 'initial-passphrase' });
    expect(demoSucceeded(result([node({}), refused]))).toBe(true);
    const bad = node({
      name: 'worker-2',
      boot: 'tampered',
      joined: false,
      disk: 'both',
      diskVerified: false,
    });
    expect(demoSucceeded(result([node({}), bad]))).toBe(false);
    expect(renderSummary(result([bad]))).toMatch(/^worker-2 .* REFUSED +both FAILED /m);
  });
});

describe('confboot demo (kubeadm and the Kubernetes API simulated)', () => {
  it('joins good nodes, refuses the tampered one with the PCR mismatch, and proves keys and PCR 15', async () => {
    const lines: string[] = [];
    const result = await runDemo({ nodes: 2, tampered: 1, keep: false, progress: (l) => lines.push(l) });
    expect(demoSucceeded(result)).toBe(true);
    expect(result.nodes.map((n) => [n.name, n.role, n.joined])).toEqual([
      ['control-plane-0', 'ControlPlane', true],
      ['worker-1', 'Worker', true],
      ['worker-2', 'Worker', true],
      ['worker-3', 'Worker', false],
    ]);
    const inner = createHash('sha256').update(Buffer.from(result.clusterId, 'hex')).digest();
    const pcr15 = createHash('sha256').update(Buffer.alloc(32)).update(inner).digest('hex');
    for (const n of result.nodes) {
      // Joined disks open only with the issued key; the refused node's only with its initial passphrase.
      expect(n.disk, n.name).toBe(n.joined ? 'issued-key' : 'initial-passphrase');
      expect(n.diskVerified, n.name).toBe(true);
      expect(n.pcr15, n.name).toBe(n.joined ? pcr15 : '00'.repeat(32));
    }
    // The operator sees expected vs actual from the join service's audit record; the node itself was
    // told the failed check and register only, never the expected value.
    const expected12 = expectedAttestationConfig().measurements['12']?.expected as string;
    expect(result.nodes[3]?.reason).toContain(`PCR12: expected ${expected12}, got `);
    expect(result.nodes[3]?.reason).toMatch(/PCR12: expected [0-9a-f]{64}, got [0-9a-f]{64}/);
    expect(result.nodes[3]?.toldNode).toBe('measurements: PCR 12');
    expect(JSON.stringify(result.nodes[3]?.toldNode)).not.toContain(expected12.slice(0, 8));
    expect(lines.join('\n')).toContain('Simulated: kubeadm');
    // Every joined worker's kubelet got its client certificate through TLS bootstrap, its CSR
    // approved by the node operator for its join ticket (kubeadm's auto-approval was deleted);
    // the operator, and nobody else, deleted their JoiningNodes once their Nodes were Ready.
    expect(
      result.nodes.map((n) => [n.name, n.kubeletClientCert?.via, n.kubeletClientCert?.approvedBy]),
    ).toEqual([
      ['control-plane-0', 'kubeadm-init', null],
      ['worker-1', 'csr', 'AttestedJoinTicket'],
      ['worker-2', 'csr', 'AttestedJoinTicket'],
      ['worker-3', 'none', null],
    ]);
    expect(result.hostDeleted).toEqual([]);
    expect([...result.operatorDeleted].sort()).toEqual(['worker-1 (worker-1)', 'worker-2 (worker-2)']);
    const summary = renderSummary(result);
    expect(summary).toContain('worker-3 refused: measurement validation failed');
    expect(summary).toContain('(the node itself was told only: measurements: PCR 12)');
    expect(summary).toMatch(/^worker-1 .* yes +issued-key ok /m);
    expect(summary).toMatch(/^worker-3 .* REFUSED +initial-passphrase ok /m);
    expect(result.workDir).toBeUndefined();
    const workLine = lines.find((l) => l.includes('Work directory')) ?? '';
    const dir = /Work directory (\S+);/.exec(workLine)?.[1] ?? '';
    expect(dir).not.toBe('');
    expect(existsSync(dir)).toBe(false);
    expect(processesUnder(dir)).toBe('');

    // Each joined worker's receipt, as `demo --json` prints it, verifies with `confboot receipt
    // verify` and the demo's JWKS, and is refused after a change.
    const json = JSON.parse(JSON.stringify(result)) as DemoResult;
    const workers = json.nodes.filter((n) => n.role === 'Worker' && n.joined);
    expect(workers.map((n) => [n.name, n.receiptVerified])).toEqual([
      ['worker-1', true],
      ['worker-2', true],
    ]);
    expect(json.nodes.find((n) => !n.joined)?.receipt).toBeUndefined();
    const out = mkdtempSync(join(tmpdir(), 'confboot-demo-receipts-'));
    const quiet = [
      vi.spyOn(process.stdout, 'write').mockImplementation(() => true),
      vi.spyOn(process.stderr, 'write').mockImplementation(() => true),
    ];
    try {
      writeFileSync(join(out, 'jwks.json'), JSON.stringify(json.jwks));
      for (const n of workers) {
        const receipt = n.receipt as string;
        writeFileSync(join(out, 'r.jwt'), receipt);
        expect(
          await receiptCli(['verify', '--jwks', join(out, 'jwks.json'), join(out, 'r.jwt')]),
          n.name,
        ).toBe(0);
        const i = receipt.indexOf('.') + 5;
        writeFileSync(
          join(out, 'r.jwt'),
          receipt.slice(0, i) + (receipt[i] === 'x' ? 'y' : 'x') + receipt.slice(i + 1),
        );
        expect(
          await receiptCli(['verify', '--jwks', join(out, 'jwks.json'), join(out, 'r.jwt')]),
          n.name,
        ).toBe(1);
      }
    } finally {
      for (const q of quiet) q.mockRestore();
      rmSync(out, { recursive: true, force: true });
    }
  }, 120_000);
});
