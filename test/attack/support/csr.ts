/**
 * Hand-made kubelet CSRs for the attack suite: any subject (common name, organizations, or RDN by RDN) and any
 * SANs (IP and DNS), signed by a fresh P-256 key, optionally with a broken signature. The
 * production CSR factory only makes well-formed kubelet CSRs, so attackers build their own here.
 * Test code only.
 */
import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** What the attacker's CSR asks for. */
export interface CsrSpec {
  /** Full common name, e.g. `system:node:worker-1`. */
  commonName: string;
  /** Organizations (default `["system:nodes"]`). */
  organizations?: string[];
  /**
   * The whole subject, RDN by RDN (each record one RDN: attribute type → values); replaces
   * `organizations` and `commonName` when given, for subjects with several CNs, multi-valued RDNs,
   * extra attributes or another order.
   */
  subject?: x509.JsonName;
  ips?: string[];
  dns?: string[];
  /** Flip a bit of the signature. */
  breakSignature?: boolean;
}

/** Builds a DER PKCS#10 request per `spec`. */
export async function craftCsr(spec: CsrSpec): Promise<Uint8Array> {
  const alg = { name: 'ECDSA', namedCurve: 'P-256' };
  const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const names = [
    ...(spec.ips ?? []).map((value) => ({ type: 'ip' as const, value })),
    ...(spec.dns ?? []).map((value) => ({ type: 'dns' as const, value })),
  ];
  const csr = await x509.Pkcs10CertificateRequestGenerator.create({
    name: spec.subject ?? [
      ...(spec.organizations ?? ['system:nodes']).map((o) => ({ '2.5.4.10': [o] })),
      { '2.5.4.3': [spec.commonName] },
    ],
    keys,
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' } as webcrypto.EcdsaParams,
    extensions: names.length > 0 ? [new x509.SubjectAlternativeNameExtension(names)] : [],
  });
  const der = new Uint8Array(csr.rawData);
  if (spec.breakSignature) {
    // The signature BIT STRING is the last element: flipping the last byte keeps the DER valid.
    der[der.length - 1] = (der[der.length - 1] as number) ^ 0x01;
  }
  return der;
}
