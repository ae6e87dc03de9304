/**
 * An attestation config as a verifier of a node that already joined reads it: the config expects the
 * node-lock register (PCR 15 of a vTPM variant) as zero, the value of a node that has yet to join,
 * while a joined node's register holds the cluster's marker. `confboot verify --cluster-id` and the
 * node operator's re-attestation both expect the marked value instead, in every measurement map.
 */
import { expectedPcr15 } from '../../adapters/tpm/pcr15-marker.js';
import { ConfbootError, messageOf } from '../../ports/errors.js';
import type { Variant } from '../../ports/variant.js';
import { variantEntry } from './index.js';

/**
 * `config` (JSON bytes) with the node-lock register of vTPM variant `variant` expected as a node of
 * cluster `clusterId` marks it.
 * @throws ConfbootError `invalid-argument` for a variant that is not a vTPM variant, or a config that is not JSON
 */
export function withNodeLockMarked(variant: Variant, config: Uint8Array, clusterId: Uint8Array): Buffer {
  const entry = variantEntry(variant);
  if (entry.kind !== 'vtpm')
    throw new ConfbootError(
      'invalid-argument',
      `the cluster ID is for vTPM variants; ${variant} is ${entry.kind}`,
    );
  let parsed: { measurements?: Record<string, unknown>; measurementSets?: Array<{ measurements?: unknown }> };
  try {
    parsed = JSON.parse(Buffer.from(config).toString('utf8'));
  } catch (err) {
    throw new ConfbootError('invalid-argument', `the attestation config is not JSON: ${messageOf(err)}`);
  }
  const lock = String(entry.registers.nodeLock);
  const marked = { expected: Buffer.from(expectedPcr15(clusterId)).toString('hex'), warnOnly: false };
  const maps = [parsed.measurements, ...(parsed.measurementSets ?? []).map((s) => s.measurements)];
  for (const m of maps) if (m && typeof m === 'object') (m as Record<string, unknown>)[lock] = marked;
  return Buffer.from(JSON.stringify(parsed));
}
