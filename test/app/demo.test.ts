/**
 * The demo end to end: real swtpm, cryptsetup, attested TLS and gRPC on loopback; kubeadm and the
 * Kubernetes API simulated (as the demo says). The test recomputes PCR 15 itself and checks that
 * nothing is left behind.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { demoSucceeded, renderSummary } from '../../src/app/cli/demo.js';
import { runDemo } from '../../src/app/demo/demo.js';

/** Processes whose command line mentions `dir` (the demo's swtpm state dirs live under it). */
const processesUnder = (dir: string) => {
  try {
    return execFileSync('pgrep', ['-f', dir], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
};

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
      expect(n.diskKeyVerified, n.name).toBe(true);
      expect(n.pcr15, n.name).toBe(n.joined ? pcr15 : '00'.repeat(32));
    }
    expect(result.nodes[3]?.reason).toMatch(/PCR12: expected [0-9a-f]{64}, got [0-9a-f]{64}/);
    expect(lines.join('\n')).toContain('Simulated: kubeadm');
    expect(renderSummary(result)).toContain('worker-3 refused: measurement validation failed');
    expect(result.workDir).toBeUndefined();
    const workLine = lines.find((l) => l.includes('Work directory')) ?? '';
    const dir = /Work directory (\S+);/.exec(workLine)?.[1] ?? '';
    expect(dir).not.toBe('');
    expect(existsSync(dir)).toBe(false);
    expect(processesUnder(dir)).toBe('');
  }, 120_000);
});
