/**
 * What a simulated `kubeadm join` checks of the kubelet certificate a join ticket delivered: the
 * certificate matches the kubelet's private key and names this node (`CN=system:node:<name>`).
 */
import { createPublicKey, X509Certificate } from 'node:crypto';

/** The problems found (empty: the certificate and key belong together and name `nodeName`). */
export function kubeletCertificateProblems(
  certPem: Uint8Array,
  keyPem: Uint8Array,
  nodeName: string,
): string[] {
  const problems: string[] = [];
  const cert = new X509Certificate(certPem);
  if (!cert.publicKey.equals(createPublicKey(Buffer.from(keyPem))))
    problems.push('kubelet key does not match its certificate');
  if (!cert.subject.includes(`CN=system:node:${nodeName}`))
    problems.push('kubelet certificate names another node');
  return problems;
}
