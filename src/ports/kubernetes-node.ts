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

/** One attribute of a distinguished name: its type (`CN`, `O`, another short name or a dotted OID) and value. */
export interface NameAttribute {
  type: string;
  value: string;
}

/** A distinguished name as its RDNs in order, each with its attributes (one for a single-valued RDN). */
export type NameRdns = readonly (readonly NameAttribute[])[];

const ATTRIBUTE_TYPES: Readonly<Record<string, 'O' | 'CN'>> = {
  O: 'O',
  '2.5.4.10': 'O',
  CN: 'CN',
  '2.5.4.3': 'CN',
};

function renderName(subject: NameRdns): string {
  return subject.map((rdn) => rdn.map((a) => `${a.type}=${a.value}`).join('+')).join(', ') || '(empty)';
}

/**
 * Why `subject` is not exactly a kubelet's subject, or undefined when it is: two single-valued RDNs,
 * `O=system:nodes` then `CN=system:node:<name>`, nothing else. Any other shape is refused because
 * readers disagree on it: Go's pkix.Name (the Kubernetes API server) keeps the LAST common name and
 * every organization, other parsers the first, so a second CN, a multi-valued RDN or an extra
 * attribute could make the name that is checked differ from the name that authenticates.
 */
export function kubeletSubjectProblem(subject: NameRdns): string | undefined {
  const multi = subject.findIndex((rdn) => rdn.length !== 1);
  if (multi >= 0) {
    const rdn = subject[multi] ?? [];
    return `subject RDN ${multi + 1} holds ${rdn.length} attributes (${renderName([rdn])}); each RDN must hold exactly one`;
  }
  const attrs = subject.map((rdn) => rdn[0] as NameAttribute);
  const others = attrs.filter((a) => ATTRIBUTE_TYPES[a.type] === undefined).map((a) => a.type);
  if (others.length > 0) return `subject may hold only O and CN, also has ${others.join(', ')}`;
  const orgs = attrs.filter((a) => ATTRIBUTE_TYPES[a.type] === 'O').map((a) => a.value);
  if (orgs.length !== 1 || orgs[0] !== KUBELET_CSR_ORGANIZATION)
    return `organization must be exactly [${JSON.stringify(KUBELET_CSR_ORGANIZATION)}], is ${JSON.stringify(orgs)}`;
  const cns = attrs.filter((a) => ATTRIBUTE_TYPES[a.type] === 'CN').map((a) => a.value);
  if (cns.length !== 1)
    return `subject must have exactly one common name, has ${cns.length}: ${JSON.stringify(cns)}`;
  if (ATTRIBUTE_TYPES[attrs[0]?.type ?? ''] !== 'O')
    return `subject must be O=${KUBELET_CSR_ORGANIZATION} followed by CN=${KUBELET_CSR_CN_PREFIX}<name>, is ${renderName(subject)}`;
  const cn = cns[0] as string;
  if (!cn.startsWith(KUBELET_CSR_CN_PREFIX))
    return `common name must start with ${JSON.stringify(KUBELET_CSR_CN_PREFIX)}, is ${JSON.stringify(cn)}`;
  return undefined;
}
