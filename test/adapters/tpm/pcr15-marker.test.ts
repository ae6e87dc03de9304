import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CLUSTER_ID_PCR, expectedPcr15, Pcr15Marker } from '../../../src/adapters/tpm/pcr15-marker.js';
import { Tpm2ToolsTpm } from '../../../src/adapters/tpm/tpm2-tools-tpm.js';
import { useSwtpm } from '../../support/swtpm.js';
import { tpm2 } from './tpm-test-helpers.js';

const clusterId = createHash('sha256').update('cluster').digest();
const hex = (b: Uint8Array | undefined): string => Buffer.from(b ?? []).toString('hex');

describe('expectedPcr15', () => {
  it('is SHA256(zeros ‖ SHA256(clusterId)) from reset, and chains from a given value', () => {
    const event = createHash('sha256').update(clusterId).digest();
    const once = createHash('sha256').update(Buffer.alloc(32)).update(event).digest();
    expect(hex(expectedPcr15(clusterId))).toBe(once.toString('hex'));
    const twice = createHash('sha256').update(once).update(event).digest();
    expect(hex(expectedPcr15(clusterId, once))).toBe(twice.toString('hex'));
  });
});

describe('Pcr15Marker on swtpm', () => {
  const swtpm = useSwtpm();

  it('a fresh node is not bootstrapped; after marking it is, and PCR 15 equals expectedPcr15', async () => {
    const s = await swtpm();
    const tpm = new Tpm2ToolsTpm({ tcti: s.tcti });
    const marker = new Pcr15Marker(tpm);
    expect(await marker.isBootstrapped()).toBe(false);
    await marker.markBootstrapped(clusterId);
    expect(await marker.isBootstrapped()).toBe(true);
    expect(hex((await tpm.readPcrs([CLUSTER_ID_PCR])).get(15))).toBe(hex(expectedPcr15(clusterId)));
    // Seen by an independent reader too (and in the SHA-1 bank, which PCR_Event extends as well).
    expect((await tpm2(s.tcti, 'tpm2_pcrread', ['sha256:15'])).toLowerCase()).toContain(
      hex(expectedPcr15(clusterId)),
    );
    expect(await tpm2(s.tcti, 'tpm2_pcrread', ['sha1:15'])).not.toMatch(/0x0{40}\b/);
  });

  it('detects a node marked by another process (marker state lives in the TPM, not in memory)', async () => {
    const s = await swtpm();
    await new Pcr15Marker(new Tpm2ToolsTpm({ tcti: s.tcti })).markBootstrapped(clusterId);
    expect(await new Pcr15Marker(new Tpm2ToolsTpm({ tcti: s.tcti })).isBootstrapped()).toBe(true);
  });

  it('wraps TPM failures with the operation', async () => {
    const s = await swtpm();
    const tcti = s.tcti;
    await s.stop();
    const marker = new Pcr15Marker(new Tpm2ToolsTpm({ tcti }));
    await expect(marker.markBootstrapped(clusterId)).rejects.toThrow(
      /^marking node as bootstrapped in PCR 15: .*tpm2_pcrevent failed/s,
    );
    await expect(marker.isBootstrapped()).rejects.toMatchObject({
      code: 'unavailable',
      message: expect.stringMatching(
        /^checking whether the node is bootstrapped \(PCR 15\): .*tpm2_pcrread/s,
      ),
    });
  });
});
