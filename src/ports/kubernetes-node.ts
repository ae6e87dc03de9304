/**
 * Words of a Kubernetes node that the domain and the adapters share: the control-plane files a
 * joining control plane receives, the subject of a kubelet client certificate request, and how the
 * join service spells node names.
 */
import { ConfbootError } from './errors.js';

/**
 * The control-plane files a joining control plane receives (kubeadm's eight CA files), relative to
 * the pki directory. No other name is accepted: the names become paths.
 */
export const CONTROL_PLANE_FILE_NAMES: readonly string[] = Object.freeze([
  'ca.key',
  'sa.key',
  'front-proxy-ca.key',
  'etcd/ca.key',
  'ca.crt',
  'sa.pub',
  'front-proxy-ca.crt',
  'etcd/ca.crt',
]);

/** Organization every kubelet CSR must carry, and nothing else. */
export const KUBELET_CSR_ORGANIZATION = 'system:nodes';
/** Prefix of a kubelet CSR's common name; the rest is the node name. */
export const KUBELET_CSR_CN_PREFIX = 'system:node:';

/** A node name as the join service records it: lower case, `_` → `-` (upstream's JoiningNode spelling). */
export function foldNodeName(name: string): string {
  return name.toLowerCase().replaceAll('_', '-');
}

const RFC1123_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const RFC1123_SUBDOMAIN_RE = new RegExp(`^${RFC1123_LABEL}(\\.${RFC1123_LABEL})*$`);

/**
 * {@link foldNodeName}, then checks that the result is an RFC 1123 subdomain (dots allowed, unlike
 * upstream's escaping bug). Throws `invalid-argument` otherwise.
 */
export function normalizeNodeName(name: string): string {
  const normalized = foldNodeName(name);
  const labelsOk = normalized.split('.').every((l) => l.length <= 63);
  if (normalized.length > 253 || !labelsOk || !RFC1123_SUBDOMAIN_RE.test(normalized)) {
    throw new ConfbootError(
      'invalid-argument',
      `node name ${JSON.stringify(name)} is not a valid RFC 1123 name after normalisation`,
    );
  }
  return normalized;
}
