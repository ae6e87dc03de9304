import { createHash, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { publicKeySha256, readCsrRequest } from '../../../src/adapters/kubernetes/csr-request.js';
import { kubeletCsrPem } from '../../../src/testbed/simulated/kubelet-bootstrap.js';

describe('readCsrRequest', () => {
  it("reads a kubelet CSR's subject and the SHA-256 of its key", async () => {
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = await kubeletCsrPem(
      'worker-1',
      privateKey.export({ type: 'sec1', format: 'pem' }).toString(),
    );
    const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
    expect(await readCsrRequest(pem)).toEqual({
      commonNames: ['system:node:worker-1'],
      organizations: ['system:nodes'],
      publicKeySha256: createHash('sha256').update(spki).digest('hex'),
    });
    expect(publicKeySha256(spki)).toBe(createHash('sha256').update(spki).digest('hex'));
  });

  it('refuses what is not a request, and a request whose signature does not verify', async () => {
    await expect(readCsrRequest('hello')).rejects.toThrow('not a PEM PKCS#10 certificate request');
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const pem = await kubeletCsrPem(
      'worker-1',
      privateKey.export({ type: 'sec1', format: 'pem' }).toString(),
    );
    const der = Buffer.from(pem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
    der.writeUInt8((der.at(-5) ?? 0) ^ 0xff, der.length - 5); // inside the signature
    const tampered = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    await expect(readCsrRequest(tampered)).rejects.toThrow(/signature does not verify|not a PEM/);
  });
});
