/**
 * Tag and label keys the cloud adapters read (upstream's `constellation-*`), and how a role tag's
 * value becomes a {@link Role}. Shared by every provider; imports no SDK.
 */
import type { Role } from '../../../ports/types.js';

/** The tag/label keys a provider reads. All configurable; defaults are upstream's names. */
export interface TagKeys {
  /** The node's role, `ControlPlane` or `Worker`. */
  role: string;
  /** The cluster UID; every instance of the cluster carries it. */
  uid: string;
  /** The bcrypt hash of the init secret. */
  initSecretHash: string;
}

/** Upstream's keys: `constellation-role`, `constellation-uid`, `constellation-init-secret-hash`. */
export const DEFAULT_TAG_KEYS: Readonly<TagKeys> = Object.freeze({
  role: 'constellation-role',
  uid: 'constellation-uid',
  initSecretHash: 'constellation-init-secret-hash',
});

/** Fills the keys a caller did not set with {@link DEFAULT_TAG_KEYS}. */
export function resolveTagKeys(keys: Partial<TagKeys> | undefined): TagKeys {
  return { ...DEFAULT_TAG_KEYS, ...(keys ?? {}) };
}

/**
 * Reads a role tag value. `ControlPlane`, `control-plane` and `Worker` in any case are understood;
 * anything else, including a missing tag, is `Unknown` (the domain decides what that means).
 */
export function parseRole(value: string | null | undefined): Role {
  const v = (value ?? '').trim().toLowerCase();
  if (v === 'controlplane' || v === 'control-plane') return 'ControlPlane';
  if (v === 'worker') return 'Worker';
  return 'Unknown';
}
