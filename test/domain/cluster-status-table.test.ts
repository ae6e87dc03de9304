/**
 * confboot status as text: every line fits 120 columns whatever the names, reasons and problems,
 * columns stay aligned, and what is out of policy is listed under the table.
 */
import { describe, expect, it } from 'vitest';
import { clusterStatus } from '../../src/domain/cluster-status.js';
import { STATUS_TABLE_WIDTH, shortAge, statusTable } from '../../src/domain/cluster-status-table.js';
import { FakeClock } from '../fakes/fake-clock.js';
import { DAY, healthy, issued, node } from '../support/cluster-status-snapshot.js';

const policy = (clock: FakeClock) => ({ now: clock.now(), maxEvidenceAgeMs: 30 * DAY });

describe('statusTable', () => {
  it('fits 120 columns with long names, reasons and many problems, and lists what is out of policy', async () => {
    const clock = new FakeClock();
    const snap = healthy(clock);
    const long = `worker-${'x'.repeat(80)}.example.internal`;
    snap.nodes.push({ ...node(long, false, '10.0.0.5', '2026-11-03T00:00:00Z'), ready: false });
    snap.evidence.push({
      ...issued(long, 'bbbbbbbb-2222-3333-4444-555555555555', clock.now(), `set-${'y'.repeat(50)}`),
      variant: 'azure-sev-snp-with-a-long-name',
      receiptKid: 'k'.repeat(43),
      receiptStatus: 'contraindicated',
    });
    await clock.advance(10 * DAY);
    snap.evidence.push({
      ...issued(long, 'cccc', clock.now()),
      key: 'refused-disk/cccc',
      peer: '10.0.0.5:1',
      outcome: 'refused',
      reason: `measurement-${'z'.repeat(60)}`,
    });
    const text = statusTable(clusterStatus(snap, policy(clock)));
    const lines = text.trimEnd().split('\n');
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(STATUS_TABLE_WIDTH);
    expect(lines[0]).toBe('Image v2.20.0, Kubernetes v1.31.1');
    expect(lines[1]).toMatch(/^NODE +ROLE +VARIANT +SET +LAST DECISION +RECEIPT +DISK +AGE +REATT +POLICY$/);
    expect(lines.find((l) => l.startsWith('w-1'))).toMatch(
      /^w-1 +worker +qemu-vtpm +image-b +issued 10d +kid- affirming +11111111 +10d +none +ok$/,
    );
    expect(lines.find((l) => l.startsWith('cp-1'))).toMatch(/ init .* ok$/);
    expect(text).toContain('Out of policy:');
    expect(text).toMatch(
      /\n {2}worker-x+…: refused \(measurement-z+…\), measurement-set-retired, no-disk-binding\n/,
    );
  });

  it('shows the last re-attestation (FAIL with its reason under the table, ok) in the REATT column', () => {
    const clock = new FakeClock();
    const snap = healthy(clock);
    const at = clock.now().toISOString();
    snap.evidence[0] = { ...snap.evidence[0]!, lastReattestation: { at, ok: true, reason: 'ok' } };
    snap.evidence[1] = { ...snap.evidence[1]!, lastReattestation: { at, ok: false, reason: 'unreachable' } };
    const lines = statusTable(clusterStatus(snap, policy(clock)))
      .trimEnd()
      .split('\n');
    expect(lines.find((l) => l.startsWith('cp-2'))).toMatch(/ ok +ok$/);
    expect(lines.find((l) => l.startsWith('w-1'))).toMatch(/ FAIL +OUT$/);
    expect(lines).toContain('  w-1: reattestation-failed (unreachable)');
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(STATUS_TABLE_WIDTH);
  });

  it('says every node is in policy when they are', () => {
    const clock = new FakeClock();
    expect(statusTable(clusterStatus(healthy(clock), policy(clock)))).toContain('Every node is in policy.');
  });
});

describe('shortAge', () => {
  it.each([
    [42, '42s'],
    [300, '5m'],
    [3 * 3600 + 5, '3h'],
    [12 * 86_400, '12d'],
  ])('%i seconds read %s', (seconds, text) => expect(shortAge(seconds)).toBe(text));
});
