import { describe, expect, it } from 'vitest';
import { expectedPcr15 } from '../../../src/adapters/tpm/pcr15-marker.js';
import { withNodeLockMarked } from '../../../src/app/registry/node-lock-config.js';

const clusterId = new Uint8Array(32).fill(7);
const marked = { expected: Buffer.from(expectedPcr15(clusterId)).toString('hex'), warnOnly: false };

describe('withNodeLockMarked', () => {
  it('expects PCR 15 marked with the cluster ID in the measurements and in every set, the rest unchanged', () => {
    const config = {
      measurements: { '4': 'aa'.repeat(32), '15': '00'.repeat(32) },
      measurementSets: [{ name: 'a', measurements: { '15': '00'.repeat(32) } }],
    };
    const out = JSON.parse(
      withNodeLockMarked('qemu-vtpm', Buffer.from(JSON.stringify(config)), clusterId).toString(),
    );
    expect(out.measurements).toEqual({ '4': 'aa'.repeat(32), '15': marked });
    expect(out.measurementSets[0]).toEqual({ name: 'a', measurements: { '15': marked } });
  });

  it.each([
    ['a variant that is not vTPM', 'qemu-tdx', '{}', 'is for vTPM variants'],
    ['a config that is not JSON', 'qemu-vtpm', '{', 'not JSON'],
  ] as const)('refuses %s', (_name, variant, text, message) => {
    expect(() => withNodeLockMarked(variant, Buffer.from(text), clusterId)).toThrow(message);
  });
});
