import { describe, expect, it } from 'vitest';
import { deriveClusterId } from '../../src/domain/key-derivation.js';
import { UnlockRace } from '../../src/domain/unlock-race.js';
import { filled, RecordingLogger, StubMarker, StubNodeStateStore } from './stubs.js';

const KEY = filled(32, 7);
const SECRET = filled(32, 8);
const SALT = filled(32, 3);

/** A disk that opens only with KEY; its error names its device path. */
class StubDisk {
  unlocks = 0;
  async unlock(key: Uint8Array): Promise<void> {
    this.unlocks++;
    if (!Buffer.from(key).equals(Buffer.from(KEY))) throw new Error('no keyslot of /dev/secret-path opens');
  }
}

function race() {
  const deps = {
    disk: new StubDisk(),
    nodeState: new StubNodeStateStore(),
    marker: new StubMarker(),
    logger: new RecordingLogger(),
  };
  deps.nodeState.states.push({ role: 'ControlPlane', measurementSalt: SALT });
  return { deps, race: new UnlockRace(deps) };
}

describe('UnlockRace', () => {
  it('the first key that opens the disk wins: the node is marked, the race ends, later attempts are refused', async () => {
    const { deps, race: r } = race();
    const clusterId = await r.open({ source: 'rejoin', endpoint: '192.0.2.1:30090' }, KEY, SECRET);
    expect(clusterId).toEqual(deriveClusterId(SECRET, SALT));
    expect(deps.marker.calls).toEqual([clusterId]);
    expect(r.signal.aborted).toBe(true);
    expect(r.winner()).toEqual({ outcome: 'rejoined', clusterId, endpoint: '192.0.2.1:30090' });
    await expect(r.open({ source: 'recovery' }, KEY, SECRET)).rejects.toThrow(/open already/);
    expect(deps.disk.unlocks).toBe(1);
  });

  it('a key that does not open the disk is refused permission-denied without the disk own words; the race goes on', async () => {
    const { deps, race: r } = race();
    const refusal = await r.open({ source: 'recovery' }, filled(32, 1), SECRET).catch((e: unknown) => e);
    expect(refusal).toMatchObject({ code: 'permission-denied' });
    expect((refusal as Error).message).not.toContain('secret-path');
    expect(JSON.stringify(deps.logger.events)).toContain('secret-path');
    expect(r.signal.aborted).toBe(false);
    expect(r.winner()).toBeUndefined();
    await r.open({ source: 'recovery' }, KEY, SECRET);
    expect(r.winner()).toMatchObject({ outcome: 'recovered' });
  });

  it('shares naming another cluster ID: the derived one is used and the difference logged', async () => {
    const { deps, race: r } = race();
    await r.open({ source: 'recovery', namedClusterId: filled(32, 0xee) }, KEY, SECRET);
    expect(deps.marker.calls).toEqual([deriveClusterId(SECRET, SALT)]);
    expect(deps.logger.events.some((e) => /another cluster ID/.test(e.msg))).toBe(true);
  });

  it.each([
    [
      'marking PCR 15 fails',
      (d: ReturnType<typeof race>['deps']) => (d.marker.markBootstrappedErr = new Error('TPM gone')),
    ],
    ['the disk holds no node state', (d: ReturnType<typeof race>['deps']) => d.nodeState.states.splice(0)],
    [
      'the measurement salt has the wrong length',
      (d: ReturnType<typeof race>['deps']) =>
        (d.nodeState.states[0] = { role: 'Worker', measurementSalt: filled(5, 1) }),
    ],
  ])('after the disk opened, %s: fatal for the whole race', async (_name, breakIt) => {
    const { deps, race: r } = race();
    breakIt(deps);
    await expect(r.open({ source: 'rejoin', endpoint: 'lb' }, KEY, SECRET)).rejects.toMatchObject({
      recoverable: false,
    });
    expect(r.decided).toBe(true);
    expect(r.signal.aborted).toBe(true);
    expect(() => r.winner()).toThrow(/after opening the state disk \(rejoin\)/);
    await expect(r.open({ source: 'recovery' }, KEY, SECRET)).rejects.toThrow(/open already/);
  });

  it('stopped: no winner, attempts are refused, the disk is never tried', async () => {
    const { deps, race: r } = race();
    r.stop();
    expect(r.signal.aborted).toBe(true);
    await expect(r.open({ source: 'rejoin', endpoint: 'lb' }, KEY, SECRET)).rejects.toThrow(/stopped/);
    expect(deps.disk.unlocks).toBe(0);
    expect(r.winner()).toBeUndefined();
  });

  it('attempts run one at a time: a recovery attempt waits while another runs', async () => {
    const { deps, race: r } = race();
    const order: string[] = [];
    let release: () => void = () => {};
    const gate = new Promise<void>((res) => {
      release = res;
    });
    deps.disk.unlock = async (key: Uint8Array) => {
      order.push(`start ${key[0]}`);
      if (key[0] === 1) await gate;
      order.push(`end ${key[0]}`);
      throw new Error('wrong key');
    };
    const first = r.open(
      { source: 'recovery', call: { peerAddress: '198.51.100.1' } },
      filled(32, 1),
      SECRET,
    );
    const second = r.open(
      { source: 'recovery', call: { peerAddress: '198.51.100.2' } },
      filled(32, 2),
      SECRET,
    );
    await new Promise((res) => setImmediate(res));
    release();
    await Promise.allSettled([first, second]);
    expect(order).toEqual(['start 1', 'end 1', 'start 2', 'end 2']);
  });
});
