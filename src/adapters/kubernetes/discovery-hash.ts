/**
 * kubeadm's discovery pin of the cluster CA (`--discovery-token-ca-cert-hash`): `sha256:` + hex
 * SHA-256 of the CA certificate's SubjectPublicKeyInfo, from a kubeconfig (admin.conf) or from the
 * CA certificate itself.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { parse as parseYaml } from 'yaml';
import { ConfbootError } from '../../ports/errors.js';

/**
 * The kubeadm discovery pin of the first CA certificate in a kubeconfig's current context:
 * `sha256:` + hex SHA-256 of the certificate's SubjectPublicKeyInfo, as kubeadm pins it.
 * @throws ConfbootError `failed-precondition` naming what is missing or unparsable.
 */
export function discoveryHashFromKubeconfig(kubeconfig: string, source = 'kubeconfig'): string {
  const fail = (why: string, cause?: unknown) =>
    new ConfbootError('failed-precondition', `computing discovery CA hash from ${source}: ${why}`, { cause });
  let doc: unknown;
  try {
    doc = parseYaml(kubeconfig);
  } catch (err) {
    throw fail(`not valid YAML: ${(err as Error).message}`, err);
  }
  if (typeof doc !== 'object' || doc === null) throw fail('not a kubeconfig');
  const conf = doc as {
    'current-context'?: unknown;
    contexts?: Array<{ name?: unknown; context?: { cluster?: unknown } }>;
    clusters?: Array<{ name?: unknown; cluster?: Record<string, unknown> }>;
  };
  const ctxName = conf['current-context'];
  if (typeof ctxName !== 'string' || ctxName === '') throw fail('no current context');
  const ctx = (Array.isArray(conf.contexts) ? conf.contexts : []).find((c) => c?.name === ctxName);
  if (!ctx) throw fail(`current context "${ctxName}" is not defined`);
  const clusterName = ctx.context?.cluster;
  const cluster = (Array.isArray(conf.clusters) ? conf.clusters : []).find(
    (c) => c?.name === clusterName,
  )?.cluster;
  if (typeof clusterName !== 'string' || !cluster) throw fail(`no cluster for context "${ctxName}"`);
  const caData = cluster['certificate-authority-data'];
  if (typeof caData !== 'string' || caData === '')
    throw fail(`cluster "${clusterName}" has no certificate-authority-data`);
  const pem = Buffer.from(caData, 'base64').toString('utf8');
  return discoveryHashFromCaCert(pem, `${source}, certificate-authority-data of cluster "${clusterName}"`);
}

/**
 * The kubeadm discovery pin of the first certificate in a PEM text (the cluster CA, e.g.
 * `/etc/kubernetes/pki/ca.crt`): `sha256:` + hex SHA-256 of its SubjectPublicKeyInfo.
 * @throws ConfbootError `failed-precondition` when it holds no parsable PEM certificate.
 */
export function discoveryHashFromCaCert(pem: string, source = 'CA certificate'): string {
  const fail = (why: string, cause?: unknown) =>
    new ConfbootError('failed-precondition', `computing discovery CA hash from ${source}: ${why}`, { cause });
  const first = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(pem)?.[0];
  if (!first) throw fail('holds no PEM certificate');
  let cert: X509Certificate;
  try {
    cert = new X509Certificate(first);
  } catch (err) {
    throw fail(`parsing the CA certificate: ${(err as Error).message}`, err);
  }
  const spki = cert.publicKey.export({ type: 'spki', format: 'der' });
  return `sha256:${createHash('sha256').update(spki).digest('hex')}`;
}
