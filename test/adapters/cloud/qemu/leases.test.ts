import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { leaseToPeer, parseLeases, readLeases } from '../../../../src/adapters/cloud/qemu/leases.js';
import { useTmpDirs } from '../../../support/tmp.js';

const tmp = useTmpDirs('confboot-leases-');

const LEASES = [
  '1767225600 52:54:00:12:34:56 10.42.0.2 control-plane-0 01:52:54:00:12:34:56',
  '',
  '1767225601\t52:54:00:ab:cd:ef  10.42.0.3 worker-0 *',
  '',
].join('\n');

describe('parseLeases', () => {
  it('reads one lease per line, skipping blank lines and splitting on any whitespace', () => {
    expect(parseLeases(LEASES)).toEqual([
      { expiry: '1767225600', mac: '52:54:00:12:34:56', ip: '10.42.0.2', hostname: 'control-plane-0' },
      { expiry: '1767225601', mac: '52:54:00:ab:cd:ef', ip: '10.42.0.3', hostname: 'worker-0' },
    ]);
    expect(parseLeases('')).toEqual([]);
  });

  it('refuses a line with fewer than four fields, naming the line', () => {
    expect(() =>
      parseLeases('1 52:54:00:12:34:56 10.42.0.2 cp-0\n\n1 52:54:00:ab:cd:ef 10.42.0.3\n'),
    ).toThrow(/^leases line 3: expected/);
  });
});

describe('readLeases', () => {
  it('reads and parses a leases file', async () => {
    const path = join(tmp(), 'dnsmasq.leases');
    writeFileSync(path, LEASES);
    expect((await readLeases(path)).map((l) => l.hostname)).toEqual(['control-plane-0', 'worker-0']);
  });

  it('fails for a missing file', async () => {
    await expect(readLeases(join(tmp(), 'absent.leases'))).rejects.toThrow(/ENOENT/);
  });
});

describe('leaseToPeer', () => {
  it("gives upstream's instance metadata, role from the hostname", () => {
    const [cp, worker] = parseLeases(LEASES);
    expect(leaseToPeer(cp!)).toEqual({
      Name: 'control-plane-0',
      ProviderID: 'qemu:///hostname/control-plane-0',
      Role: 'ControlPlane',
      VPCIP: '10.42.0.2',
      SecondaryIPRange: '',
      AliasIPRanges: null,
    });
    expect(leaseToPeer(worker!).Role).toBe('Worker');
  });
});
