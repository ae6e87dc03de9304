/**
 * The names several parts of confboot must agree on: upstream's master secret Secret, the
 * DiskBinding resource, and the owner label value, which must be a valid label value (at most 63
 * characters) derived from the owner's SHA-256 alone.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  DISK_BINDING_GROUP,
  DISK_BINDING_OWNER_LABEL,
  DISK_BINDING_PLURAL,
  DISK_BINDING_VERSION,
  diskBindingOwnerLabel,
  MASTER_SECRET_NAME,
} from '../../../src/adapters/kubernetes/names.js';

describe('Kubernetes names', () => {
  it("keeps upstream's master secret name and a DiskBinding API path Kubernetes accepts", () => {
    expect(MASTER_SECRET_NAME).toBe('constellation-mastersecret');
    expect(`/apis/${DISK_BINDING_GROUP}/${DISK_BINDING_VERSION}/${DISK_BINDING_PLURAL}`).toBe(
      '/apis/confboot.dev/v1alpha1/diskbindings',
    );
    expect(DISK_BINDING_OWNER_LABEL).toMatch(/^[a-z0-9.-]+\/[a-z0-9A-Z._-]{1,63}$/);
  });

  it('labels an owner with the first 56 hex digits of its SHA-256: a valid label value, one per owner', () => {
    const owner = 'gce://project/zone/control-plane-0';
    const label = diskBindingOwnerLabel(owner);
    expect(label).toBe(createHash('sha256').update(owner).digest('hex').slice(0, 56));
    expect(label).toMatch(/^[0-9a-f]{56}$/);
    expect(diskBindingOwnerLabel('gce://project/zone/control-plane-1')).not.toBe(label);
    expect(diskBindingOwnerLabel('ünïcode')).toBe(
      createHash('sha256').update('ünïcode', 'utf8').digest('hex').slice(0, 56),
    );
  });
});
