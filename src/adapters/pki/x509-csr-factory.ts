/**
 * Kubelet CSR for the joining node: a fresh ECDSA P-256 key and a PKCS#10 request
 * for `O=system:nodes, CN=system:node:<name>` with IP SANs only. The join service signs it
 * ({@link FileCertificateAuthority}); the node keeps the key as PEM `EC PRIVATE KEY` (SEC1).
 */
import 'reflect-metadata';
import { createPrivateKey, webcrypto } from 'node:crypto';
import { isIP } from 'node:net';
import * as x509 from '@peculiar/x509';
import type { CsrFactory, KubeletCsr } from '../../ports/csr-factory.js';
import { ConfbootError } from '../../ports/errors.js';
import { KUBELET_CSR_CN_PREFIX, KUBELET_CSR_ORGANIZATION } from '../../ports/kubernetes-node.js';

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

/** {@link CsrFactory} with @peculiar/x509 over Node's WebCrypto. */
export class X509CsrFactory implements CsrFactory {
  /** New key and CSR for `nodeName` with IP SANs `ips` (no DNS names). */
  async create(nodeName: string, ips: string[]): Promise<KubeletCsr> {
    const op = `creating kubelet CSR for node ${JSON.stringify(nodeName)}`;
    if (nodeName === '') throw new ConfbootError('invalid-argument', `${op}: node name is empty`);
    for (const ip of ips) {
      if (isIP(ip) === 0)
        throw new ConfbootError('invalid-argument', `${op}: ${JSON.stringify(ip)} is not an IP address`);
    }
    const alg = { name: 'ECDSA', namedCurve: 'P-256' };
    const keys = (await webcrypto.subtle.generateKey(alg, true, [
      'sign',
      'verify',
    ])) as webcrypto.CryptoKeyPair;
    const csr = await x509.Pkcs10CertificateRequestGenerator.create({
      // Go's pkix.Name order: O before CN.
      name: [
        { '2.5.4.10': [KUBELET_CSR_ORGANIZATION] },
        { '2.5.4.3': [`${KUBELET_CSR_CN_PREFIX}${nodeName}`] },
      ],
      keys,
      signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' } as webcrypto.EcdsaParams,
      extensions:
        ips.length > 0
          ? [new x509.SubjectAlternativeNameExtension(ips.map((value) => ({ type: 'ip' as const, value })))]
          : [],
    });
    const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
    const keyPem = createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({
      format: 'pem',
      type: 'sec1',
    });
    return { csrDer: new Uint8Array(csr.rawData), keyPem: new TextEncoder().encode(keyPem.toString()) };
  }
}
