/**
 * The checks of a ticket request that need no dependency (domain): the size of every field (read
 * before anything is parsed), the disk UUID, the kubelet CSR's subject, and the IP addresses it may
 * name. Errors are `invalid-argument` and say what to fix; their refusal reason is
 * `request-too-large` (sizes), `malformed-request` (UUID, CSR) or `caller-mismatch` (IP addresses).
 */
import type { CsrInfo } from '../ports/certificate-authority.js';
import { messageOf } from '../ports/errors.js';
import { joinRefusal } from '../ports/join-refusal.js';
import { KUBELET_CSR_CN_PREFIX, kubeletSubjectProblem, normalizeNodeName } from '../ports/kubernetes-node.js';
import { canonicalIp } from '../ports/peer-address.js';
import type { JoinTicketRequest } from '../ports/types.js';

const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/**
 * Largest size of each field of a ticket request, checked before anything is parsed. A kubelet CSR
 * (P-256 or RSA-4096 key, a few IP SANs) is well under 4 KiB; an SSH host key under 1 KiB.
 */
export const REQUEST_FIELD_LIMITS = Object.freeze({
  /** Kubelet CSR, DER bytes. */
  certificateRequestBytes: 16 * 1024,
  /** Disk UUID, characters (a UUID has 36). */
  diskUuidChars: 64,
  /** SSH host public key, bytes. */
  hostPublicKeyBytes: 1024,
  /** SSH host certificate principals: how many, and characters each (a DNS name has at most 253). */
  hostCertificatePrincipals: 16,
  hostCertificatePrincipalChars: 253,
});

/**
 * The largest encoded join request the per-field limits allow (protobuf: tag and length prefix per
 * field, UTF-8 up to 4 bytes per character), rounded up to a KiB: the gRPC receive limit.
 */
export function maxTicketRequestBytes(): number {
  const l = REQUEST_FIELD_LIMITS;
  const field = (n: number) => 1 + 5 + n;
  const total =
    field(l.certificateRequestBytes) +
    field(4 * l.diskUuidChars) +
    field(l.hostPublicKeyBytes) +
    l.hostCertificatePrincipals * field(4 * l.hostCertificatePrincipalChars) +
    2;
  return Math.ceil(total / 1024) * 1024;
}

/**
 * Throws `invalid-argument` naming the field when a request field is over its
 * {@link REQUEST_FIELD_LIMITS} entry. Reads only lengths: safe before any parsing.
 */
export function checkRequestSizes(req: Partial<JoinTicketRequest> & { diskUuid: string }): void {
  const l = REQUEST_FIELD_LIMITS;
  const over = (field: string, size: number, max: number, unit: string) =>
    joinRefusal(
      'invalid-argument',
      'request-too-large',
      `${field} has ${size} ${unit}, more than the limit of ${max}`,
      {
        recoverable: false,
      },
    );
  if (req.diskUuid.length > l.diskUuidChars)
    throw over('disk UUID', req.diskUuid.length, l.diskUuidChars, 'characters');
  const csr = req.certificateRequest?.length ?? 0;
  if (csr > l.certificateRequestBytes)
    throw over('certificate signing request', csr, l.certificateRequestBytes, 'bytes');
  const hostKey = req.hostPublicKey?.length ?? 0;
  if (hostKey > l.hostPublicKeyBytes) throw over('host public key', hostKey, l.hostPublicKeyBytes, 'bytes');
  const principals = req.hostCertificatePrincipals ?? [];
  if (principals.length > l.hostCertificatePrincipals)
    throw over('host certificate principals', principals.length, l.hostCertificatePrincipals, 'entries');
  for (const p of principals)
    if (p.length > l.hostCertificatePrincipalChars)
      throw over('a host certificate principal', p.length, l.hostCertificatePrincipalChars, 'characters');
}

/** Throws `invalid-argument` unless `uuid` is a non-empty UUID (any case). */
export function checkDiskUuid(uuid: string): void {
  if (uuid === '') throw joinRefusal('invalid-argument', 'malformed-request', 'disk UUID is empty');
  if (!UUID_RE.test(uuid))
    throw joinRefusal(
      'invalid-argument',
      'malformed-request',
      `disk UUID ${JSON.stringify(uuid)} is not a UUID`,
    );
}

/**
 * Upstream's kubelet CSR checks on an inspected CSR, made strict: valid signature, a subject of
 * exactly two single-valued RDNs `O=system:nodes` then `CN=system:node:<name>` (nothing else, so no
 * reader can find another name in it), no DNS names. Returns the normalised node name; throws
 * `invalid-argument` saying what to fix.
 */
export function checkKubeletCsr(info: CsrInfo): string {
  const bad = (why: string) => joinRefusal('invalid-argument', 'malformed-request', `kubelet CSR: ${why}`);
  if (!info.signatureValid) throw bad('signature does not verify');
  const problem = kubeletSubjectProblem(info.subject);
  if (problem !== undefined) throw bad(problem);
  if (info.dnsNames.length > 0) throw bad('DNS names are not allowed (IP addresses only)');
  const commonName = info.subject[1]?.[0]?.value ?? '';
  try {
    return normalizeNodeName(commonName.slice(KUBELET_CSR_CN_PREFIX.length));
  } catch (err) {
    throw bad(messageOf(err));
  }
}

/**
 * Throws `invalid-argument` naming every CSR IP address that is not one of `allowed` (`whose`
 * describes the allowed set in the message). Returns the requested addresses, canonical and without
 * repeats: what the kubelet certificate may name.
 */
export function checkIps(
  op: string,
  requested: readonly string[],
  allowed: readonly string[],
  whose: string,
): string[] {
  const ok = new Set(allowed.map((a) => canonicalIp(a)).filter((a) => a !== undefined));
  const extra = requested.filter((r) => {
    const c = canonicalIp(r);
    return c === undefined || !ok.has(c);
  });
  if (extra.length === 0) return [...new Set(requested.map((r) => canonicalIp(r) as string))];
  throw joinRefusal(
    'invalid-argument',
    'caller-mismatch',
    `${op}: checking CSR: kubelet CSR: IP addresses ${extra.join(', ')} are not addresses of ${whose} (allowed: ${allowed.length > 0 ? allowed.join(', ') : 'none'})`,
    { recoverable: false },
  );
}
