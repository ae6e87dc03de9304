/**
 * Reads a CertificateSigningRequest's `spec.request` (a PEM PKCS#10 request, base64 in the API
 * object): its subject's common names and organizations, SHA-256 of its SubjectPublicKeyInfo, and
 * whether its self-signature verifies. Loads @peculiar/x509 on first use (x509-loader.ts) and no
 * Kubernetes client, so the simulated control plane can use it too.
 */
import { createHash } from 'node:crypto';
import { loadX509 } from '../pki/x509-loader.js';

/** What is read from one request. */
export interface CsrRequestFacts {
  commonNames: string[];
  organizations: string[];
  /** Lower-case hex SHA-256 of the request's SubjectPublicKeyInfo (DER). */
  publicKeySha256: string;
}

/**
 * The facts of `pem` (PEM `CERTIFICATE REQUEST`). Rejects with a one-line reason when it is not a
 * request or its signature does not verify.
 */
export async function readCsrRequest(pem: string): Promise<CsrRequestFacts> {
  const x509 = await loadX509();
  let csr: InstanceType<typeof x509.Pkcs10CertificateRequest>;
  try {
    csr = new x509.Pkcs10CertificateRequest(pem);
  } catch {
    throw new Error('not a PEM PKCS#10 certificate request');
  }
  if (!(await csr.verify())) throw new Error("the request's self-signature does not verify");
  return {
    commonNames: csr.subjectName.getField('CN'),
    organizations: csr.subjectName.getField('O'),
    publicKeySha256: createHash('sha256').update(Buffer.from(csr.publicKey.rawData)).digest('hex'),
  };
}

/** Lower-case hex SHA-256 of the SubjectPublicKeyInfo of a PEM or DER public key or certificate's key. */
export function publicKeySha256(spkiDer: Uint8Array): string {
  return createHash('sha256').update(spkiDer).digest('hex');
}
