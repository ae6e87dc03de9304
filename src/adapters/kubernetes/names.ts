/**
 * Names of Kubernetes objects that several parts of confboot must agree on. It imports only
 * node:crypto, so the simulated API server in the mini guest bundle can use it without loading
 * @kubernetes/client-node.
 */
import { createHash } from 'node:crypto';

/** The Opaque Secret in kube-system holding the master secret and its salt (upstream's name). */
export const MASTER_SECRET_NAME = 'constellation-mastersecret';

/** Group, version and plural of confboot's DiskBinding resource (cluster-scoped; docs/identity.md). */
export const DISK_BINDING_GROUP = 'confboot.dev';
export const DISK_BINDING_VERSION = 'v1alpha1';
export const DISK_BINDING_PLURAL = 'diskbindings';

/**
 * The label every DiskBinding carries with its owner's digest, so that the join service can list one
 * instance's bindings without reading all of them (label values allow 63 characters, a SHA-256 in
 * hex 64, so the first 56 hex digits are used).
 */
export const DISK_BINDING_OWNER_LABEL = 'confboot.dev/owner-sha256';

/** The value of {@link DISK_BINDING_OWNER_LABEL} for `owner`. */
export function diskBindingOwnerLabel(owner: string): string {
  return createHash('sha256').update(owner, 'utf8').digest('hex').slice(0, 56);
}
